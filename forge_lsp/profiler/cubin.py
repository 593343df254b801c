"""SASS offsets to source lines, read from the cubins a build produced: no profiler, no GPU.

A PC sample names a kernel (its mangled name) and an offset into its SASS. A cubin compiled with `-lineinfo`
carries a DWARF line table (`.debug_line`) whose rows map SASS addresses to file and line; each kernel's rows are
one sequence, whose start address is relocated to the kernel's `.text.<name>` section. The cubins come from a
`.cubin` file, or from the fat binary (`.nv_fatbin`) of a shared object or object file nvcc built, such as the
extension `load_inline` builds for a candidate (one cubin per target architecture; a compressed one is skipped and
said so).

Pure: bytes in, tables out. pyelftools reads the ELF and decodes the line program.
"""

from __future__ import annotations

import bisect
import io
import struct
from dataclasses import dataclass, field
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
_FATBIN_HEADER = struct.Struct("<IHHQ")  # magic, version, header size, size of the entries that follow
# one entry: kind (1 PTX, 2 ELF), version, header size, payload size, compressed size, -, minor, major, arch
_ENTRY_HEADER = struct.Struct("<HHIQIIHHI")
_ELF_KIND = 2
_ELF_MAGIC = b"\x7fELF"


@dataclass(frozen=True)
class Cubin:
    arch: int  # the SM it was compiled for (90 for sm_90), 0 where a bare .cubin does not say
    data: bytes


@dataclass
class FatbinContents:
    cubins: list[Cubin] = field(default_factory=list)
    unreadable: int = 0  # ELF entries whose payload is not a plain ELF (compressed: `-Xfatbin -compress-all`)


def fatbin_cubins(blob: bytes) -> FatbinContents:
    """The cubins in a fat binary blob (one or more fat binaries one after another, as a `.nv_fatbin` section holds
    them)."""
    out = FatbinContents()
    pos = 0
    while pos + _FATBIN_HEADER.size <= len(blob):
        magic, _version, header_size, size = _FATBIN_HEADER.unpack_from(blob, pos)
        if magic != FATBIN_MAGIC:
            pos += 8  # fat binaries are 8-byte aligned in the section
            continue
        off, end = pos + header_size, min(pos + header_size + size, len(blob))
        while off + _ENTRY_HEADER.size <= end:
            kind, _v, entry_header, payload, compressed, _u, _minor, _major, arch = _ENTRY_HEADER.unpack_from(blob, off)
            if entry_header < _ENTRY_HEADER.size or payload == 0:
                break  # not an entry header: the rest of this fat binary cannot be walked
            body = blob[off + entry_header : off + entry_header + payload]
            if kind == _ELF_KIND:
                if compressed == 0 and body[:4] == _ELF_MAGIC:
                    out.cubins.append(Cubin(arch, bytes(body)))
                else:
                    out.unreadable += 1
            off += entry_header + payload
        pos = max(end, pos + 8)
    return out


def cubins_of(path: str | Path) -> FatbinContents:
    """The cubins a build left in `path`: a `.cubin` itself, or the `.nv_fatbin` section of a shared object or
    object file. Empty when it has none; OSError when it cannot be read."""
    data = Path(path).read_bytes()
    if data[:4] != _ELF_MAGIC:
        return FatbinContents()
    from elftools.common.exceptions import ELFError
    from elftools.elf.elffile import ELFFile

    try:
        elf = ELFFile(io.BytesIO(data))
        if elf["e_machine"] == "EM_CUDA":
            return FatbinContents([Cubin(0, data)])
        section = elf.get_section_by_name(".nv_fatbin")
        return fatbin_cubins(section.data()) if section is not None else FatbinContents()
    except (ELFError, struct.error, ValueError):
        return FatbinContents()


@dataclass(frozen=True)
class Row:
    offset: int  # from the kernel's first SASS instruction, in bytes
    file: str
    line: int


@dataclass
class LineTable:
    """Each kernel's rows, by the mangled name PC sampling reports (offsets ascending)."""

    kernels: dict[str, list[Row]] = field(default_factory=dict)

    def line_of(self, kernel: str, offset: int) -> tuple[str, int] | None:
        """(file, line) of the SASS instruction at `offset` into `kernel`; None where the table has no row for it
        (no line info, or another build)."""
        rows = self.kernels.get(kernel)
        if not rows:
            return None
        at = bisect.bisect_right(rows, offset, key=lambda r: r.offset) - 1
        if at < 0 or rows[at].line <= 0:
            return None
        return rows[at].file, rows[at].line

    def update(self, other: LineTable) -> None:
        self.kernels.update(other.kernels)


def line_table(cubin: bytes) -> LineTable:
    """The cubin's SASS-to-line table; empty when it was compiled without line info or cannot be read."""
    from elftools.common.exceptions import DWARFError, ELFError

    try:
        return _line_table(cubin)
    except (ELFError, DWARFError, struct.error, ValueError, KeyError, IndexError):
        return LineTable()


def _line_table(cubin: bytes) -> LineTable:
    from elftools.dwarf.constants import DW_LNE
    from elftools.dwarf.structs import DWARFStructs
    from elftools.elf.elffile import ELFFile
    from elftools.elf.relocation import RelocationSection
    from elftools.elf.sections import SymbolTableSection

    elf = ELFFile(io.BytesIO(cubin))
    section = elf.get_section_by_name(".debug_line")
    if section is None:
        return LineTable()
    # each sequence's DW_LNE_set_address is relocated to its kernel's section, in the order the sequences appear;
    # pyelftools cannot apply the CUDA relocation type, so the symbols are read here and the rows kept relative
    kernels_in_order: list[tuple[str, int]] = []  # (kernel, the relocation's addend)
    rela = elf.get_section_by_name(".rela.debug_line")
    if isinstance(rela, RelocationSection):
        symtab = elf.get_section(rela["sh_link"])
        if not isinstance(symtab, SymbolTableSection):
            return LineTable()
        for reloc in sorted(rela.iter_relocations(), key=lambda r: r["r_offset"]):
            symbol = symtab.get_symbol(reloc["r_info_sym"])
            name = symbol.name
            if symbol["st_info"]["type"] == "STT_SECTION" or not name:
                name = elf.get_section(symbol["st_shndx"]).name
            addend = reloc["r_addend"] if reloc.is_RELA() else 0
            kernels_in_order.append((name.removeprefix(".text."), addend))
    dwarf = elf.get_dwarf_info(relocate_dwarf_sections=False)
    structs = DWARFStructs(little_endian=elf.little_endian, dwarf_format=32, address_size=elf.elfclass // 8)
    table = LineTable()
    size, offset, sequence = section["sh_size"], 0, 0
    while offset < size:
        program = dwarf._parse_line_program_at_offset(offset, structs)  # pyelftools reaches it only through a CU
        header = program.header
        dirs = [d.decode(errors="replace") if isinstance(d, bytes) else str(d) for d in header["include_directory"]]
        files = []
        for entry in header["file_entry"]:
            name = entry.name.decode(errors="replace") if isinstance(entry.name, bytes) else str(entry.name)
            if entry.dir_index and not name.startswith("/") and entry.dir_index <= len(dirs):
                name = f"{dirs[entry.dir_index - 1].rstrip('/')}/{name}"
            files.append(name)
        rows: list[Row] = []
        start = 0  # the address the sequence's DW_LNE_set_address named, before relocation
        for entry in program.get_entries():
            if entry.is_extended and entry.command == DW_LNE.set_address:
                start = entry.args[0]
            state = entry.state
            if state is None:
                continue
            if state.end_sequence:
                _keep(table, kernels_in_order, sequence, start, rows)
                sequence, rows = sequence + 1, []
                continue
            file = files[state.file - 1] if 0 < state.file <= len(files) else ""
            rows.append(Row(state.address - start, file, state.line))
        if rows:
            _keep(table, kernels_in_order, sequence, start, rows)
            sequence += 1
        end = program.program_end_offset
        if end <= offset:
            break
        offset = end
    return table


def _keep(
    table: LineTable, kernels_in_order: list[tuple[str, int]], sequence: int, start: int, rows: list[Row]
) -> None:
    """The sequence's rows as its kernel's, offsets from the kernel's first instruction (the relocated start is the
    kernel's section plus the addend)."""
    if sequence < len(kernels_in_order) and rows:
        kernel, addend = kernels_in_order[sequence]
        table.kernels[kernel] = sorted((Row(r.offset + addend, r.file, r.line) for r in rows), key=lambda r: r.offset)


def line_tables(paths: list[str | Path], arch: int | None = None) -> tuple[LineTable, str]:
    """One table over every kernel in the cubins of `paths` (for `arch` where a fat binary has several), with a
    note saying what could not be read ("" when everything could)."""
    table, notes = LineTable(), []
    for path in paths:
        try:
            contents = cubins_of(path)
        except OSError as exc:
            notes.append(f"{Path(path).name}: {exc.strerror or exc}")
            continue
        cubins = contents.cubins
        if arch is not None and any(c.arch == arch for c in cubins):
            cubins = [c for c in cubins if c.arch == arch]
        for cubin in cubins:
            table.update(line_table(cubin.data))
        if contents.unreadable and not cubins:
            notes.append(f"{Path(path).name}: its cubins are compressed, so its SASS is not mapped to lines")
    return table, "; ".join(notes)
