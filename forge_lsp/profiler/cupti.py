"""CUPTI inside the process that runs the kernels: kernel activity records, PC sampling, the range profiler's
hardware counters and the cubins of the modules the process loads. Used by the profiled process only
(`profiler.inprocess`), never by the server.

Bound with ctypes on the libcupti the process already has (torch's ``nvidia/cu13/lib``, cuda-pathfinder's, or the
toolkit's): cupti-python binds neither PC sampling nor the range profiler for CUDA 13.0 (13.0.1 has neither, and
13.4 sends struct sizes that libcupti 13.0 refuses). Each struct below is CUDA 13.0's, field for field, and
`tests/test_cupti_layout.py` checks its size and offsets against the headers with a C compiler. Every call is
checked: a failure raises `CuptiError` with CUPTI's own words, and the caller falls back to Nsight Compute.
"""

from __future__ import annotations

import ctypes as ct
import glob
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass

c_sz, c_vp, u8, u16, u32, u64 = ct.c_size_t, ct.c_void_p, ct.c_uint8, ct.c_uint16, ct.c_uint32, ct.c_uint64

SUCCESS = 0
MAX_LIMIT_REACHED = 12

# CUpti_CallbackDomain / CUpti_CallbackIdResource
DOMAIN_RESOURCE = 3
CBID_MODULE_LOADED = 6
# CUpti_ActivityKind
ACTIVITY_CONCURRENT_KERNEL = 10
# CUpti_ProfilerType, CUpti_ProfilerRange, CUpti_ProfilerReplayMode
PROFILER_TYPE_RANGE = 0
AUTO_RANGE, USER_RANGE = 1, 2
KERNEL_REPLAY, USER_REPLAY = 2, 3
# CUpti_PCSamplingConfigurationAttributeType, CUpti_PCSamplingCollectionMode
PCS_PERIOD, PCS_STALL_REASON, PCS_SCRATCH_BUFFER, PCS_HARDWARE_BUFFER, PCS_COLLECTION_MODE = 1, 2, 3, 4, 5
PCS_START_STOP_CONTROL, PCS_OUTPUT_FORMAT, PCS_DATA_BUFFER = 6, 7, 8
PCS_CONTINUOUS, PCS_KERNEL_SERIALIZED = 1, 2


class CuptiError(RuntimeError):
    """A CUPTI call that failed, with CUPTI's name and words for the result."""

    def __init__(self, function: str, code: int, words: str):
        super().__init__(f"{function} failed: {words} ({code})")
        self.function, self.code, self.words = function, code, words


# ----------------------------------------------------------------------------------- structs (CUDA 13.0 headers)


class _Params(ct.Structure):
    """A CUPTI parameter struct: its size field says how much of it the caller knows (``*_STRUCT_SIZE``: the offset
    of the last field plus its size), which is how CUPTI tells versions apart."""

    @classmethod
    def new(cls, **fields):
        params = cls(**fields)
        name, kind = cls._fields_[-1][:2]
        setattr(params, cls._fields_[0][0], getattr(cls, name).offset + ct.sizeof(kind))
        return params


def _params(name: str, fields: list[tuple[str, type]], first: str = "structSize") -> type[_Params]:
    return type(name, (_Params,), {"_fields_": [(first, c_sz), *fields]})


ProfilerInitialize = _params("CUpti_Profiler_Initialize_Params", [("pPriv", c_vp)])
ProfilerDeInitialize = _params("CUpti_Profiler_DeInitialize_Params", [("pPriv", c_vp)])
DeviceGetChipName = _params(
    "CUpti_Device_GetChipName_Params", [("pPriv", c_vp), ("deviceIndex", c_sz), ("pChipName", ct.c_char_p)]
)
GetCounterAvailability = _params(
    "CUpti_Profiler_GetCounterAvailability_Params",
    [("pPriv", c_vp), ("ctx", c_vp), ("counterAvailabilityImageSize", c_sz), ("pCounterAvailabilityImage", c_vp)],
)
HostInitialize = _params(
    "CUpti_Profiler_Host_Initialize_Params",
    [
        ("pPriv", c_vp),
        ("profilerType", ct.c_int),
        ("pChipName", ct.c_char_p),
        ("pCounterAvailabilityImage", c_vp),
        ("pHostObject", c_vp),
    ],
)
HostDeinitialize = _params("CUpti_Profiler_Host_Deinitialize_Params", [("pPriv", c_vp), ("pHostObject", c_vp)])
HostConfigAddMetrics = _params(
    "CUpti_Profiler_Host_ConfigAddMetrics_Params",
    [("pPriv", c_vp), ("pHostObject", c_vp), ("ppMetricNames", ct.POINTER(ct.c_char_p)), ("numMetrics", c_sz)],
)
HostGetConfigImageSize = _params(
    "CUpti_Profiler_Host_GetConfigImageSize_Params", [("pPriv", c_vp), ("pHostObject", c_vp), ("configImageSize", c_sz)]
)
HostGetConfigImage = _params(
    "CUpti_Profiler_Host_GetConfigImage_Params",
    [("pPriv", c_vp), ("pHostObject", c_vp), ("configImageSize", c_sz), ("pConfigImage", c_vp)],
)
HostGetNumOfPasses = _params(
    "CUpti_Profiler_Host_GetNumOfPasses_Params",
    [("pPriv", c_vp), ("configImageSize", c_sz), ("pConfigImage", c_vp), ("numOfPasses", c_sz)],
)
HostEvaluateToGpuValues = _params(
    "CUpti_Profiler_Host_EvaluateToGpuValues_Params",
    [
        ("pPriv", c_vp),
        ("pHostObject", c_vp),
        ("pCounterDataImage", c_vp),
        ("counterDataImageSize", c_sz),
        ("rangeIndex", c_sz),
        ("ppMetricNames", ct.POINTER(ct.c_char_p)),
        ("numMetrics", c_sz),
        ("pMetricValues", ct.POINTER(ct.c_double)),
    ],
)
RangeProfilerEnable = _params(
    "CUpti_RangeProfiler_Enable_Params", [("pPriv", c_vp), ("ctx", c_vp), ("pRangeProfilerObject", c_vp)]
)
RangeProfilerObject = _params(  # Disable, Start and PopRange take just the object
    "CUpti_RangeProfiler_Start_Params", [("pPriv", c_vp), ("pRangeProfilerObject", c_vp)]
)
RangeProfilerSetConfig = _params(
    "CUpti_RangeProfiler_SetConfig_Params",
    [
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("configSize", c_sz),
        ("pConfig", c_vp),
        ("counterDataImageSize", c_sz),
        ("pCounterDataImage", c_vp),
        ("range", ct.c_int),
        ("replayMode", ct.c_int),
        ("maxRangesPerPass", c_sz),
        ("numNestingLevels", u16),
        ("minNestingLevel", u16),
        ("passIndex", c_sz),
        ("targetNestingLevel", u16),
    ],
)
RangeProfilerStop = _params(
    "CUpti_RangeProfiler_Stop_Params",
    [
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("passIndex", c_sz),
        ("targetNestingLevel", c_sz),
        ("isAllPassSubmitted", u8),
    ],
)
RangeProfilerDecodeData = _params(
    "CUpti_RangeProfiler_DecodeData_Params",
    [("pPriv", c_vp), ("pRangeProfilerObject", c_vp), ("numOfRangeDropped", c_sz)],
)
RangeProfilerGetCounterDataSize = _params(
    "CUpti_RangeProfiler_GetCounterDataSize_Params",
    [
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("pMetricNames", ct.POINTER(ct.c_char_p)),
        ("numMetrics", c_sz),
        ("maxNumOfRanges", c_sz),
        ("maxNumRangeTreeNodes", u32),
        ("counterDataSize", c_sz),
    ],
)
RangeProfilerCounterDataImageInitialize = _params(
    "CUpti_RangeProfiler_CounterDataImage_Initialize_Params",
    [("pPriv", c_vp), ("pRangeProfilerObject", c_vp), ("counterDataSize", c_sz), ("pCounterData", c_vp)],
)
RangeProfilerGetCounterDataInfo = _params(
    "CUpti_RangeProfiler_GetCounterDataInfo_Params",
    [("pPriv", c_vp), ("pCounterDataImage", c_vp), ("counterDataImageSize", c_sz), ("numTotalRanges", c_sz)],
)
RangeProfilerGetRangeInfo = _params(
    "CUpti_RangeProfiler_CounterData_GetRangeInfo_Params",
    [
        ("pPriv", c_vp),
        ("pCounterDataImage", c_vp),
        ("counterDataImageSize", c_sz),
        ("rangeIndex", c_sz),
        ("rangeDelimiter", ct.c_char_p),
        ("rangeName", c_vp),
    ],
)

# PC sampling (cupti_pcsampling.h): its structs name their size field `size`
PCSamplingContext = _params("CUpti_PCSamplingEnableParams", [("pPriv", c_vp), ("ctx", c_vp)], first="size")
PCSamplingGetNumStallReasons = _params(
    "CUpti_PCSamplingGetNumStallReasonsParams",
    [("pPriv", c_vp), ("ctx", c_vp), ("numStallReasons", ct.POINTER(c_sz))],
    first="size",
)
PCSamplingGetStallReasons = _params(
    "CUpti_PCSamplingGetStallReasonsParams",
    [
        ("pPriv", c_vp),
        ("ctx", c_vp),
        ("numStallReasons", c_sz),
        ("stallReasonIndex", ct.POINTER(u32)),
        ("stallReasons", ct.POINTER(ct.c_char_p)),
    ],
    first="size",
)
PCSamplingGetData = _params(
    "CUpti_PCSamplingGetDataParams", [("pPriv", c_vp), ("ctx", c_vp), ("pcSamplingData", c_vp)], first="size"
)


class PCSamplingConfigurationInfo(ct.Structure):
    """One attribute: its type, CUPTI's status for it, and its value (a 24-byte union)."""

    _fields_ = [("attributeType", ct.c_int), ("attributeStatus", ct.c_int), ("data", u64 * 3)]


PCSamplingConfigurationInfoParams = _params(
    "CUpti_PCSamplingConfigurationInfoParams",
    [
        ("pPriv", c_vp),
        ("ctx", c_vp),
        ("numAttributes", c_sz),
        ("pPCSamplingConfigurationInfo", ct.POINTER(PCSamplingConfigurationInfo)),
    ],
    first="size",
)


class PCSamplingStallReason(ct.Structure):
    _fields_ = [("pcSamplingStallReasonIndex", u32), ("samples", u32)]


class PCSamplingPCData(ct.Structure):
    _fields_ = [
        ("size", c_sz),
        ("cubinCrc", u64),
        ("pcOffset", u64),
        ("functionIndex", u32),
        ("pad", u32),
        ("functionName", ct.c_char_p),
        ("stallReasonCount", c_sz),
        ("stallReason", ct.POINTER(PCSamplingStallReason)),
        ("correlationId", u32),
    ]


class PCSamplingData(ct.Structure):
    _fields_ = [
        ("size", c_sz),
        ("collectNumPcs", c_sz),
        ("totalSamples", u64),
        ("droppedSamples", u64),
        ("totalNumPcs", c_sz),
        ("remainingNumPcs", c_sz),
        ("rangeId", u64),
        ("pPcData", ct.POINTER(PCSamplingPCData)),
        ("nonUsrKernelsTotalSamples", u64),
        ("hardwareBufferFull", u8),
    ]


GetCubinCrc = _params(
    "CUpti_GetCubinCrcParams", [("cubinSize", c_sz), ("cubin", c_vp), ("cubinCrc", u64)], first="size"
)


# callbacks (cupti_callbacks.h)
class ResourceData(ct.Structure):
    _fields_ = [("context", c_vp), ("resourceHandle", c_vp), ("resourceDescriptor", c_vp)]


class ModuleResourceData(ct.Structure):
    _fields_ = [("moduleId", u32), ("cubinSize", c_sz), ("pCubin", c_vp)]


CALLBACK = ct.CFUNCTYPE(None, c_vp, ct.c_int, u32, c_vp)


# activity records (cupti_activity.h): CUpti_ActivityKernel10, packed, 8-byte aligned; the fields read here
class ActivityKernel(ct.Structure):
    _pack_ = 1
    _fields_ = [
        ("kind", ct.c_int),
        ("cacheConfig", u8),
        ("sharedMemoryConfig", u8),
        ("registersPerThread", u16),
        ("partitionedGlobalCacheRequested", ct.c_int),
        ("partitionedGlobalCacheExecuted", ct.c_int),
        ("start", u64),
        ("end", u64),
        ("completed", u64),
        ("deviceId", u32),
        ("contextId", u32),
        ("streamId", u32),
        ("gridX", ct.c_int32),
        ("gridY", ct.c_int32),
        ("gridZ", ct.c_int32),
        ("blockX", ct.c_int32),
        ("blockY", ct.c_int32),
        ("blockZ", ct.c_int32),
        ("staticSharedMemory", ct.c_int32),
        ("dynamicSharedMemory", ct.c_int32),
        ("localMemoryPerThread", u32),
        ("localMemoryTotal", u32),
        ("correlationId", u32),
        ("gridId", ct.c_int64),
        ("name", ct.c_char_p),
    ]


BUFFER_REQUESTED = ct.CFUNCTYPE(None, ct.POINTER(ct.POINTER(u8)), ct.POINTER(c_sz), ct.POINTER(c_sz))
BUFFER_COMPLETED = ct.CFUNCTYPE(None, c_vp, u32, ct.POINTER(u8), c_sz, c_sz)


# ----------------------------------------------------------------------------------------------- the library


def library_candidates() -> Iterator[str]:
    """Where libcupti is looked for, in order: $FORGE_CUPTI, the copy this process already mapped (torch's profiler
    links one: a second copy would fight it for the device), cuda-pathfinder, the nvidia wheels torch ships
    (``nvidia/cu13/lib``, ``nvidia/cuda_cupti/lib``), the CUDA toolkit."""
    if os.environ.get("FORGE_CUPTI"):
        yield os.environ["FORGE_CUPTI"]
    yield from mapped_libraries("libcupti.so")
    try:
        from cuda.pathfinder import load_nvidia_dynamic_lib

        yield load_nvidia_dynamic_lib("cupti").abs_path
    except Exception:  # noqa: BLE001 - not installed, or it found none: the other places follow
        pass
    for entry in sys.path:
        for pattern in ("nvidia/cu13/lib/libcupti.so*", "nvidia/cuda_cupti/lib/libcupti.so*"):
            yield from sorted(glob.glob(os.path.join(entry, pattern)))
    home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    yield from sorted(glob.glob(os.path.join(home, "extras", "CUPTI", "lib64", "libcupti.so*")))
    yield from sorted(glob.glob(os.path.join(home, "lib64", "libcupti.so*")))


def mapped_libraries(prefix: str, maps: str = "/proc/self/maps") -> list[str]:
    """The files named `prefix`* this process has mapped (Linux), in the order they appear."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as handle:
            paths = [line.split(None, 5)[-1].strip() for line in handle if prefix in line]
    except OSError:
        return []
    return list(dict.fromkeys(p for p in paths if os.path.basename(p).startswith(prefix)))


_LIB: ct.CDLL | None = None


def library() -> ct.CDLL:
    """libcupti, loaded once; `CuptiError` naming where it was looked for when none loads."""
    global _LIB
    if _LIB is not None:
        return _LIB
    tried = []
    for path in library_candidates():
        if not path or path in tried:
            continue
        tried.append(path)
        try:
            lib = ct.CDLL(path, mode=ct.RTLD_GLOBAL)
        except OSError:
            continue
        lib.cuptiGetResultString.argtypes = [ct.c_int, ct.POINTER(ct.c_char_p)]
        _LIB = lib
        return lib
    raise CuptiError("dlopen(libcupti)", -1, "no libcupti found (looked in: " + (", ".join(tried) or "nowhere") + ")")


def call(function: str, *args) -> None:
    """Call a CUPTI function; `CuptiError` with CUPTI's words when it does not succeed."""
    lib = library()
    rc = getattr(lib, function)(*args)
    if rc != SUCCESS:
        raise CuptiError(function, rc, result_string(rc))


def result_string(rc: int) -> str:
    text = ct.c_char_p()
    if library().cuptiGetResultString(rc, ct.byref(text)) == SUCCESS and text.value:
        return text.value.decode(errors="replace")
    return f"CUPTI result {rc}"


def current_context() -> int:
    """The calling thread's current CUDA context (the driver's `cuCtxGetCurrent`), as an address; 0 when none."""
    ctx = c_vp()
    rc = ct.CDLL("libcuda.so.1").cuCtxGetCurrent(ct.byref(ctx))
    if rc != 0:
        raise CuptiError("cuCtxGetCurrent", rc, "the CUDA driver has no current context")
    return int(ctx.value or 0)


# ----------------------------------------------------------------------------------------------- modules' cubins


class ModuleCubins:
    """The cubin of every module the process loads from now on (CUPTI's resource callback; with CUDA's lazy
    loading, a module loads at its kernels' first launch), by CUPTI's CRC, which PC samples name.

    Takes the process's one CUPTI subscriber: start it before the candidate is built, and never under ncu."""

    def __init__(self) -> None:
        self._blobs: list[bytes] = []
        self._by_crc: dict[int, bytes] = {}
        self._handle = c_vp()
        self._callback = CALLBACK(self._on_callback)  # kept alive as long as CUPTI may call it

    def start(self) -> ModuleCubins:
        call("cuptiSubscribe", ct.byref(self._handle), self._callback, None)
        call("cuptiEnableCallback", 1, self._handle, DOMAIN_RESOURCE, CBID_MODULE_LOADED)
        return self

    def _on_callback(self, userdata, domain, cbid, cbdata) -> None:
        if domain != DOMAIN_RESOURCE or cbid != CBID_MODULE_LOADED or not cbdata:
            return
        resource = ResourceData.from_address(cbdata)
        if not resource.resourceDescriptor:
            return
        module = ModuleResourceData.from_address(resource.resourceDescriptor)
        if module.pCubin and module.cubinSize:
            self._blobs.append(ct.string_at(module.pCubin, module.cubinSize))

    def by_crc(self, wanted: set[int]) -> dict[int, bytes]:
        """The captured cubins whose CRC is in `wanted` (CRCs are computed once per cubin, when first asked)."""
        while self._blobs and not wanted <= self._by_crc.keys():
            blob = self._blobs.pop()
            self._by_crc[cubin_crc(blob)] = blob
        return {crc: self._by_crc[crc] for crc in wanted if crc in self._by_crc}

    def stop(self) -> None:
        if self._handle:
            call("cuptiUnsubscribe", self._handle)
            self._handle = c_vp()


def cubin_crc(cubin: bytes) -> int:
    data = ct.c_char_p(cubin)  # CUPTI only reads it: no copy of the (often megabytes of) cubin
    params = GetCubinCrc.new(cubinSize=len(cubin), cubin=ct.cast(data, c_vp).value)
    call("cuptiGetCubinCrc", ct.byref(params))
    return int(params.cubinCrc)


# ----------------------------------------------------------------------------------------------- kernel records


@dataclass(frozen=True)
class KernelActivity:
    """One kernel launch as CUPTI's activity record gives it (the name as the cubin's symbol, mangled)."""

    name: str
    start_ns: int
    end_ns: int
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers_per_thread: int
    shared_static: int
    shared_dynamic: int
    correlation: int


class KernelActivities:
    """Kernel launch records (``CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL``) between `enable` and `collect`."""

    BUFFER_BYTES = 4 << 20

    def __init__(self) -> None:
        self._buffers: dict[int, ct.Array] = {}
        self.records: list[KernelActivity] = []
        self._requested = BUFFER_REQUESTED(self._on_request)
        self._completed = BUFFER_COMPLETED(self._on_complete)
        call("cuptiActivityRegisterCallbacks", self._requested, self._completed)

    def _on_request(self, buffer, size, max_records) -> None:
        raw = (u8 * (self.BUFFER_BYTES + 8))()
        address = (ct.addressof(raw) + 7) & ~7  # records are 8-byte aligned
        self._buffers[address] = raw
        buffer[0] = ct.cast(address, ct.POINTER(u8))
        size[0] = self.BUFFER_BYTES
        max_records[0] = 0

    def _on_complete(self, context, stream, buffer, size, valid) -> None:
        address = ct.cast(buffer, c_vp).value or 0
        record = ct.POINTER(ActivityKernel)()
        lib = library()
        try:
            while valid and lib.cuptiActivityGetNextRecord(buffer, c_sz(valid), ct.byref(record)) == SUCCESS:
                r = record.contents
                if r.kind == ACTIVITY_CONCURRENT_KERNEL:
                    self.records.append(
                        KernelActivity(
                            name=(r.name or b"").decode(errors="replace"),
                            start_ns=int(r.start),
                            end_ns=int(r.end),
                            grid=(r.gridX, r.gridY, r.gridZ),
                            block=(r.blockX, r.blockY, r.blockZ),
                            registers_per_thread=int(r.registersPerThread),
                            shared_static=int(r.staticSharedMemory),
                            shared_dynamic=int(r.dynamicSharedMemory),
                            correlation=int(r.correlationId),
                        )
                    )
        finally:
            self._buffers.pop(address, None)

    def enable(self) -> None:
        self.records = []
        call("cuptiActivityEnable", ACTIVITY_CONCURRENT_KERNEL)

    def collect(self) -> list[KernelActivity]:
        """Stop recording and return the launches, in the order they started."""
        call("cuptiActivityDisable", ACTIVITY_CONCURRENT_KERNEL)
        call("cuptiActivityFlushAll", 1)
        return sorted(self.records, key=lambda r: r.start_ns)


# ----------------------------------------------------------------------------------------------- PC sampling


@dataclass(frozen=True)
class PcRecord:
    """The samples of one SASS instruction: its cubin's CRC, kernel (mangled), offset and stall counts by name."""

    cubin_crc: int
    kernel: str
    offset: int
    stalls: dict[str, int]


class PcSampler:
    """CUPTI's PC sampling on one context: which instruction each sampled warp was at, and why it stalled
    (the reasons named as ncu names them, ``smsp__pcsamp_warps_issue_stalled_<reason>``). Kernels are serialized
    while it samples; `period` is log2 of the cycles between samples (CUPTI's range is 5..31)."""

    def __init__(self, ctx: int, *, max_pcs: int = 8192, period: int = 10) -> None:
        self.ctx = ctx
        call("cuptiPCSamplingEnable", ct.byref(PCSamplingContext.new(ctx=ctx)))
        try:
            n = c_sz(0)
            call(
                "cuptiPCSamplingGetNumStallReasons",
                ct.byref(PCSamplingGetNumStallReasons.new(ctx=ctx, numStallReasons=ct.pointer(n))),
            )
            count = n.value
            self._index = (u32 * count)()
            self._names = [ct.create_string_buffer(128) for _ in range(count)]
            names = (ct.c_char_p * count)(*[ct.cast(b, ct.c_char_p) for b in self._names])
            call(
                "cuptiPCSamplingGetStallReasons",
                ct.byref(
                    PCSamplingGetStallReasons.new(
                        ctx=ctx, numStallReasons=count, stallReasonIndex=self._index, stallReasons=names
                    )
                ),
            )
            self.reasons = {self._index[i]: self._names[i].value.decode() for i in range(count)}
            self._pcs = (PCSamplingPCData * max_pcs)()
            self._stalls = [(PCSamplingStallReason * count)() for _ in range(max_pcs)]
            for i in range(max_pcs):
                self._pcs[i].size = ct.sizeof(PCSamplingPCData)
                self._pcs[i].stallReason = self._stalls[i]
            self.data = PCSamplingData(size=ct.sizeof(PCSamplingData), collectNumPcs=max_pcs, pPcData=self._pcs)
            attributes = (PCSamplingConfigurationInfo * 7)()
            for slot, (kind, *values) in enumerate(
                (
                    (PCS_STALL_REASON, count, ct.addressof(self._index)),
                    (PCS_PERIOD, period),
                    (PCS_HARDWARE_BUFFER, 128 << 20),
                    (PCS_SCRATCH_BUFFER, 16 << 20),
                    (PCS_DATA_BUFFER, ct.addressof(self.data)),
                    (PCS_START_STOP_CONTROL, 1),
                    (PCS_COLLECTION_MODE, PCS_KERNEL_SERIALIZED),
                )
            ):
                attributes[slot].attributeType = kind
                for j, value in enumerate(values):
                    attributes[slot].data[j] = value
            self._attributes = attributes
            call(
                "cuptiPCSamplingSetConfigurationAttribute",
                ct.byref(
                    PCSamplingConfigurationInfoParams.new(
                        ctx=ctx, numAttributes=len(attributes), pPCSamplingConfigurationInfo=attributes
                    )
                ),
            )
        except CuptiError:
            self.close()
            raise

    def start(self) -> None:
        self.data.totalNumPcs = self.data.remainingNumPcs = 0
        call("cuptiPCSamplingStart", ct.byref(PCSamplingContext.new(ctx=self.ctx)))

    def stop(self) -> list[PcRecord]:
        """Stop sampling; every sampled instruction with its stall counts."""
        call("cuptiPCSamplingStop", ct.byref(PCSamplingContext.new(ctx=self.ctx)))
        merged: dict[tuple[int, str, int], dict[str, int]] = {}
        first = True
        while True:
            data = self.data
            for i in range(data.totalNumPcs):
                pc = data.pPcData[i]
                key = (int(pc.cubinCrc), (pc.functionName or b"").decode(errors="replace"), int(pc.pcOffset))
                stalls = merged.setdefault(key, {})
                for j in range(pc.stallReasonCount):
                    reason = pc.stallReason[j]
                    name = self.reasons.get(reason.pcSamplingStallReasonIndex, "unknown")
                    stalls[name] = stalls.get(name, 0) + int(reason.samples)
            if not (first or data.remainingNumPcs > 0):
                break
            first = False
            data.totalNumPcs = 0
            call(
                "cuptiPCSamplingGetData",
                ct.byref(PCSamplingGetData.new(ctx=self.ctx, pcSamplingData=ct.addressof(self.data))),
            )
            if self.data.totalNumPcs == 0 and self.data.remainingNumPcs == 0:
                break
        return [PcRecord(crc, kernel, offset, stalls) for (crc, kernel, offset), stalls in merged.items()]

    def close(self) -> None:
        try:
            call("cuptiPCSamplingDisable", ct.byref(PCSamplingContext.new(ctx=self.ctx)))
        except CuptiError:
            pass


# ----------------------------------------------------------------------------------------------- range profiler


def _names(metrics: list[str]) -> ct.Array:
    return (ct.c_char_p * len(metrics))(*[m.encode() for m in metrics])


class HostConfig:
    """The range profiler's host side for one device and metric set: the chip, which `metrics` it knows (those it
    does not are in `unsupported`), the configuration image and the replay passes it needs. Built once per process
    and kept (`host_config`)."""

    def __init__(self, ctx: int, device_index: int, metrics: list[str]) -> None:
        self._host = c_vp()
        call("cuptiProfilerInitialize", ct.byref(ProfilerInitialize.new()))
        chip = DeviceGetChipName.new(deviceIndex=device_index)
        call("cuptiDeviceGetChipName", ct.byref(chip))
        self.chip = chip.pChipName.decode()
        availability = GetCounterAvailability.new(ctx=ctx)
        call("cuptiProfilerGetCounterAvailability", ct.byref(availability))
        self._availability = (u8 * availability.counterAvailabilityImageSize)()
        availability.pCounterAvailabilityImage = ct.addressof(self._availability)
        call("cuptiProfilerGetCounterAvailability", ct.byref(availability))
        self.metrics, self.unsupported = list(metrics), []
        self._open()
        try:
            self._add(self.metrics)
        except CuptiError:  # one the chip lacks fails the set: find it, one at a time, on a fresh host object
            self.metrics = []
            for metric in metrics:
                self._reopen()
                try:
                    self._add([metric])
                    self.metrics.append(metric)
                except CuptiError:
                    self.unsupported.append(metric)
            if not self.metrics:
                raise CuptiError(
                    "cuptiProfilerHostConfigAddMetrics", -1, f"{self.chip} knows none of the metrics asked for"
                ) from None
            self._reopen()
            self._add(self.metrics)
        size = HostGetConfigImageSize.new(pHostObject=self._host)
        call("cuptiProfilerHostGetConfigImageSize", ct.byref(size))
        self.config = (u8 * size.configImageSize)()
        call(
            "cuptiProfilerHostGetConfigImage",
            ct.byref(
                HostGetConfigImage.new(
                    pHostObject=self._host, configImageSize=size.configImageSize, pConfigImage=ct.addressof(self.config)
                )
            ),
        )
        passes = HostGetNumOfPasses.new(configImageSize=len(self.config), pConfigImage=ct.addressof(self.config))
        call("cuptiProfilerHostGetNumOfPasses", ct.byref(passes))
        self.passes = int(passes.numOfPasses)
        self.names = _names(self.metrics)

    def _open(self) -> None:
        host = HostInitialize.new(
            profilerType=PROFILER_TYPE_RANGE,
            pChipName=self.chip.encode(),
            pCounterAvailabilityImage=ct.addressof(self._availability),
        )
        call("cuptiProfilerHostInitialize", ct.byref(host))
        self._host = c_vp(host.pHostObject)

    def _reopen(self) -> None:
        self.close()
        self._open()

    def _add(self, metrics: list[str]) -> None:
        names = _names(metrics)
        call(
            "cuptiProfilerHostConfigAddMetrics",
            ct.byref(HostConfigAddMetrics.new(pHostObject=self._host, ppMetricNames=names, numMetrics=len(metrics))),
        )

    def evaluate(self, data: ct.Array, index: int) -> dict[str, float]:
        """The metrics' values in range `index` of the decoded counter data `data`."""
        values = (ct.c_double * len(self.metrics))()
        call(
            "cuptiProfilerHostEvaluateToGpuValues",
            ct.byref(
                HostEvaluateToGpuValues.new(
                    pHostObject=self._host,
                    pCounterDataImage=ct.addressof(data),
                    counterDataImageSize=len(data),
                    rangeIndex=index,
                    ppMetricNames=self.names,
                    numMetrics=len(self.metrics),
                    pMetricValues=values,
                )
            ),
        )
        return dict(zip(self.metrics, list(values), strict=True))

    def close(self) -> None:
        if self._host:
            call("cuptiProfilerHostDeinitialize", ct.byref(HostDeinitialize.new(pHostObject=self._host)))
            self._host = c_vp()


_HOSTS: dict[tuple[int, tuple[str, ...]], HostConfig] = {}


def host_config(ctx: int, device_index: int, metrics: list[str]) -> HostConfig:
    """The `HostConfig` for the device and metrics, built on first use and kept for the process."""
    key = (device_index, tuple(metrics))
    if key not in _HOSTS:
        _HOSTS[key] = HostConfig(ctx, device_index, metrics)
    return _HOSTS[key]


class RangeProfiler:
    """Hardware counters per kernel launch (auto ranges, kernel replay: CUPTI replays each kernel as many times as
    the counters need passes, saving and restoring the memory it writes), on the host side `host` prepared."""

    def __init__(self, ctx: int, host: HostConfig, *, max_ranges: int = 256) -> None:
        self.ctx, self.host, self.max_ranges = ctx, host, max_ranges
        self._object = c_vp()
        enable = RangeProfilerEnable.new(ctx=ctx)
        call("cuptiRangeProfilerEnable", ct.byref(enable))
        self._object = c_vp(enable.pRangeProfilerObject)
        data_size = RangeProfilerGetCounterDataSize.new(
            pRangeProfilerObject=self._object,
            pMetricNames=host.names,
            numMetrics=len(host.metrics),
            maxNumOfRanges=max_ranges,
            maxNumRangeTreeNodes=max_ranges,
        )
        call("cuptiRangeProfilerGetCounterDataSize", ct.byref(data_size))
        self._data = (u8 * data_size.counterDataSize)()
        call(
            "cuptiRangeProfilerCounterDataImageInitialize",
            ct.byref(
                RangeProfilerCounterDataImageInitialize.new(
                    pRangeProfilerObject=self._object,
                    counterDataSize=len(self._data),
                    pCounterData=ct.addressof(self._data),
                )
            ),
        )

    def start(self) -> None:
        call(
            "cuptiRangeProfilerSetConfig",
            ct.byref(
                RangeProfilerSetConfig.new(
                    pRangeProfilerObject=self._object,
                    configSize=len(self.host.config),
                    pConfig=ct.addressof(self.host.config),
                    counterDataImageSize=len(self._data),
                    pCounterDataImage=ct.addressof(self._data),
                    range=AUTO_RANGE,
                    replayMode=KERNEL_REPLAY,
                    maxRangesPerPass=self.max_ranges,
                    numNestingLevels=1,
                    minNestingLevel=1,
                    passIndex=0,
                    targetNestingLevel=1,
                )
            ),
        )
        call("cuptiRangeProfilerStart", ct.byref(RangeProfilerObject.new(pRangeProfilerObject=self._object)))

    def stop(self) -> list[tuple[str, dict[str, float]]]:
        """Stop; each range (one per kernel launch, in launch order) as (its name, metric values)."""
        call("cuptiRangeProfilerStop", ct.byref(RangeProfilerStop.new(pRangeProfilerObject=self._object)))
        call("cuptiRangeProfilerDecodeData", ct.byref(RangeProfilerDecodeData.new(pRangeProfilerObject=self._object)))
        info = RangeProfilerGetCounterDataInfo.new(
            pCounterDataImage=ct.addressof(self._data), counterDataImageSize=len(self._data)
        )
        call("cuptiRangeProfilerGetCounterDataInfo", ct.byref(info))
        rows = []
        for index in range(info.numTotalRanges):
            name = RangeProfilerGetRangeInfo.new(
                pCounterDataImage=ct.addressof(self._data),
                counterDataImageSize=len(self._data),
                rangeIndex=index,
                rangeDelimiter=b"/",
            )
            call("cuptiRangeProfilerCounterDataGetRangeInfo", ct.byref(name))
            label = ct.string_at(name.rangeName).decode(errors="replace") if name.rangeName else ""
            rows.append((label, self.host.evaluate(self._data, index)))
        return rows

    def close(self) -> None:
        if self._object:
            try:
                call("cuptiRangeProfilerDisable", ct.byref(RangeProfilerObject.new(pRangeProfilerObject=self._object)))
            except CuptiError:
                pass
            self._object = c_vp()
