"""CUPTI PC Sampling (cuptiPCSampling*) in-process via ctypes; cupti-python 13.4 has no bindings for it.
Flow mirrors triton-lang/triton third_party/proton/csrc/lib/Profiler/Cupti/CuptiPCSampling.cpp."""

import ctypes as ct
from collections import defaultdict

from cupti import cupti as C

c_sz, c_vp, u32, u64 = ct.c_size_t, ct.c_void_p, ct.c_uint32, ct.c_uint64


class StallReason(ct.Structure):
    _fields_ = [("pcSamplingStallReasonIndex", u32), ("samples", u32)]


class PCData(ct.Structure):  # C: packed+aligned(8) == natural layout here, sizeof 64
    _fields_ = [
        ("size", c_sz),
        ("cubinCrc", u64),
        ("pcOffset", u64),
        ("functionIndex", u32),
        ("pad", u32),
        ("functionName", ct.c_char_p),
        ("stallReasonCount", c_sz),
        ("stallReason", ct.POINTER(StallReason)),
        ("correlationId", u32),
        ("_tail", u32),
    ]


class PCSamplingData(ct.Structure):  # sizeof 80
    _fields_ = [
        ("size", c_sz),
        ("collectNumPcs", c_sz),
        ("totalSamples", u64),
        ("droppedSamples", u64),
        ("totalNumPcs", c_sz),
        ("remainingNumPcs", c_sz),
        ("rangeId", u64),
        ("pPcData", ct.POINTER(PCData)),
        ("nonUsrKernelsTotalSamples", u64),
        ("hardwareBufferFull", ct.c_uint8),
    ]


class CfgInfo(ct.Structure):  # attributeData is a 24-byte union -> 3 x u64
    _fields_ = [("attributeType", ct.c_int), ("attributeStatus", ct.c_int), ("data", u64 * 3)]


class CfgParams(ct.Structure):
    _fields_ = [("size", c_sz), ("pPriv", c_vp), ("ctx", c_vp), ("numAttributes", c_sz), ("pInfo", ct.POINTER(CfgInfo))]


class CtxParams(ct.Structure):
    _fields_ = [("size", c_sz), ("pPriv", c_vp), ("ctx", c_vp)]  # Enable/Disable/Start/Stop


class GetData(ct.Structure):
    _fields_ = [("size", c_sz), ("pPriv", c_vp), ("ctx", c_vp), ("pcSamplingData", c_vp)]


class NumStall(ct.Structure):
    _fields_ = [("size", c_sz), ("pPriv", c_vp), ("ctx", c_vp), ("numStallReasons", ct.POINTER(c_sz))]


class Stalls(ct.Structure):
    _fields_ = [
        ("size", c_sz),
        ("pPriv", c_vp),
        ("ctx", c_vp),
        ("numStallReasons", c_sz),
        ("stallReasonIndex", ct.POINTER(u32)),
        ("stallReasons", ct.POINTER(ct.c_char_p)),
    ]


class Sass2Src(ct.Structure):
    _fields_ = [
        ("size", c_sz),
        ("cubin", c_vp),
        ("functionName", ct.c_char_p),
        ("cubinSize", c_sz),
        ("lineNumber", u32),
        ("pcOffset", u64),
        ("fileName", c_vp),
        ("dirName", c_vp),
    ]


class CubinCrc(ct.Structure):
    _fields_ = [("size", c_sz), ("cubinSize", c_sz), ("cubin", c_vp), ("cubinCrc", u64)]


class ModuleResourceData(ct.Structure):
    _fields_ = [("moduleId", u32), ("cubinSize", c_sz), ("pCubin", c_vp)]


# CUpti_PCSamplingConfigurationAttributeType / CollectionMode
PERIOD, STALL, SCRATCH, HWBUF, MODE, STARTSTOP, FMT, DATABUF = 1, 2, 3, 4, 5, 6, 7, 8
CONTINUOUS, KERNEL_SERIALIZED = 1, 2


def _sz(cls):  # == the C *ParamsSize macros (offsetof(last) + sizeof(last))
    n, t = cls._fields_[-1]
    return getattr(cls, n).offset + ct.sizeof(t)


class PCSampler:
    def __init__(self, ctx_ptr, collect_num_pcs=4096, period=10, mode=KERNEL_SERIALIZED):
        C.get_context_id(ctx_ptr)  # any cupti-python call: loads libcupti.so.13 first
        self.lib = ct.CDLL("libcupti.so.13")
        self.libc = ct.CDLL(None)
        self.ctx, self.cubins = ct.c_void_p(ctx_ptr), {}  # cubinCrc -> cubin bytes
        self._call("cuptiPCSamplingEnable", CtxParams(_sz(CtxParams), None, ctx_ptr))
        n = c_sz(0)
        self._call("cuptiPCSamplingGetNumStallReasons", NumStall(_sz(NumStall), None, ctx_ptr, ct.pointer(n)))
        self.n = n.value
        self._idx = (u32 * self.n)()
        self._bufs = [ct.create_string_buffer(128) for _ in range(self.n)]
        names = (ct.c_char_p * self.n)(*[ct.cast(b, ct.c_char_p) for b in self._bufs])
        self._call("cuptiPCSamplingGetStallReasons", Stalls(_sz(Stalls), None, ctx_ptr, self.n, self._idx, names))
        self.stall_name = {self._idx[i]: self._bufs[i].value.decode() for i in range(self.n)}
        # data buffer: collect_num_pcs PC records, each with room for all stall reasons (kept alive on self)
        self._pcs = (PCData * collect_num_pcs)()
        self._sr = [(StallReason * self.n)() for _ in range(collect_num_pcs)]
        for i in range(collect_num_pcs):
            self._pcs[i].size = ct.sizeof(PCData)
            self._pcs[i].stallReason = self._sr[i]
        self.data = PCSamplingData(size=ct.sizeof(PCSamplingData), collectNumPcs=collect_num_pcs, pPcData=self._pcs)
        cfg = (CfgInfo * 7)()

        def put(k, t, *vals):
            cfg[k].attributeType = t
            for j, v in enumerate(vals):
                cfg[k].data[j] = v

        put(0, STALL, self.n, ct.addressof(self._idx))
        put(1, PERIOD, period)  # Proton default 10
        put(2, HWBUF, 128 << 20)
        put(3, SCRATCH, 16 << 20)
        put(4, DATABUF, ct.addressof(self.data))
        put(5, STARTSTOP, 1)
        put(6, MODE, mode)
        self._cfg = cfg
        self._call("cuptiPCSamplingSetConfigurationAttribute", CfgParams(_sz(CfgParams), None, ctx_ptr, 7, cfg))

    def _call(self, fn, params):
        rc = getattr(self.lib, fn)(ct.byref(params))
        if rc != 0:
            raise RuntimeError(f"{fn}: {C.Result(rc).name} ({rc})")

    def add_cubin(self, cubin: bytes):  # Triton: compiled.asm["cubin"]; NVRTC: nvrtcGetCUBIN
        buf = ct.create_string_buffer(cubin, len(cubin))
        p = CubinCrc(_sz(CubinCrc), len(cubin), ct.addressof(buf), 0)
        self._call("cuptiGetCubinCrc", p)
        self.cubins[p.cubinCrc] = cubin

    def on_module_loaded(self, userdata, domain, cbid, cbdata):  # cupti-python callback signature
        if domain == C.CallbackDomain.RESOURCE and cbid == C.CallbackIdResource.MODULE_LOADED:
            m = ModuleResourceData.from_address(cbdata.resource_descriptor)
            self.add_cubin(ct.string_at(m.pCubin, m.cubinSize))

    def start(self):
        self.data.totalNumPcs = self.data.remainingNumPcs = 0  # don't re-read the last drain's records
        self._call("cuptiPCSamplingStart", CtxParams(_sz(CtxParams), None, self.ctx.value))

    def stop(self):
        """Returns {(function, pcOffset): {stall_name: samples}} plus totals."""
        self._call("cuptiPCSamplingStop", CtxParams(_sz(CtxParams), None, self.ctx.value))
        out, first = defaultdict(lambda: defaultdict(int)), True
        while True:  # Proton: drain buffer, GetData until nothing remains
            d = self.data
            for i in range(d.totalNumPcs):
                pc = d.pPcData[i]
                key = (pc.cubinCrc, pc.functionName.decode(), pc.pcOffset)
                for j in range(pc.stallReasonCount):
                    sr = pc.stallReason[j]
                    out[key][self.stall_name.get(sr.pcSamplingStallReasonIndex, "?")] += sr.samples
            if d.remainingNumPcs > 0 or first:
                self._call(
                    "cuptiPCSamplingGetData", GetData(_sz(GetData), None, self.ctx.value, ct.addressof(self.data))
                )
                first = False
                if self.data.totalNumPcs == 0 and self.data.remainingNumPcs == 0:
                    break
            else:
                break
        return out

    def source_line(self, crc, func, pc_offset):
        cubin = self.cubins.get(crc)
        if cubin is None:
            return None
        buf = ct.create_string_buffer(cubin, len(cubin))
        p = Sass2Src(_sz(Sass2Src), ct.addressof(buf), func.encode(), len(cubin), 0, pc_offset, None, None)
        if self.lib.cuptiGetSassToSourceCorrelation(ct.byref(p)) != 0:
            return None  # no -lineinfo
        f = ct.string_at(p.fileName).decode() if p.fileName else ""
        dn = ct.string_at(p.dirName).decode() if p.dirName else ""
        self.libc.free(ct.c_void_p(p.fileName))
        self.libc.free(ct.c_void_p(p.dirName))  # caller frees (per CUPTI/Proton)
        return dn, f, p.lineNumber

    def close(self):
        self._call("cuptiPCSamplingDisable", CtxParams(_sz(CtxParams), None, self.ctx.value))


if __name__ == "__main__":
    import torch
    from cuda.bindings import driver as cu

    torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    err, ctx = cu.cuCtxGetCurrent()
    assert int(err) == 0
    pcs = PCSampler(int(ctx))
    # optional cubin capture for line mapping (needs the CUPTI subscriber slot; fails if kineto holds it):
    sp = C.SubscriberParams()
    sp.struct_size = C.SUBSCRIBER_PARAMS_SIZE
    sp.subscriber_name = "pcs"
    sub = C.subscribe_v2(pcs.on_module_loaded, None, sp.ptr)
    C.enable_callback(1, sub, C.CallbackDomain.RESOURCE, C.CallbackIdResource.MODULE_LOADED)
    a = torch.randn(8192, 8192, device="cuda")
    pcs.start()
    b = torch.softmax(a, -1)
    torch.cuda.synchronize()
    res = pcs.stop()
    for (crc, fn, off), stalls in sorted(res.items(), key=lambda kv: -sum(kv[1].values()))[:20]:
        print(fn[:60], hex(off), pcs.source_line(crc, fn, off), dict(stalls))
    pcs.close()
    C.unsubscribe(sub)
