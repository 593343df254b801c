"""Per-kernel hardware metrics in-process: cupti-python (profiler_host) + ctypes (Range Profiler).
cupti-python 13.4 has NO cuptiRangeProfiler* bindings, so the target side goes through ctypes on
the SAME libcupti.so.13 that cupti-python already loaded."""

import ctypes as ct

import numpy as np
from cupti import cupti as C
from cupti import profiler_host as ph

c_sz, c_vp = ct.c_size_t, ct.c_void_p


class _Obj(ct.Structure):  # Disable / Start / PopRange
    _fields_ = [("structSize", c_sz), ("pPriv", c_vp), ("pRangeProfilerObject", c_vp)]


class _Enable(ct.Structure):  # 13.0 layout (no cacheControlMode) -> structSize 32 works on 13.0..13.5
    _fields_ = [("structSize", c_sz), ("pPriv", c_vp), ("ctx", c_vp), ("pRangeProfilerObject", c_vp)]


class _SetConfig(ct.Structure):
    _fields_ = [
        ("structSize", c_sz),
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("configSize", c_sz),
        ("pConfig", c_vp),
        ("counterDataImageSize", c_sz),
        ("pCounterDataImage", c_vp),
        ("range", ct.c_int),
        ("replayMode", ct.c_int),
        ("maxRangesPerPass", c_sz),
        ("numNestingLevels", ct.c_uint16),
        ("minNestingLevel", ct.c_uint16),
        ("passIndex", c_sz),
        ("targetNestingLevel", ct.c_uint16),
    ]


class _Stop(ct.Structure):
    _fields_ = [
        ("structSize", c_sz),
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("passIndex", c_sz),
        ("targetNestingLevel", c_sz),
        ("isAllPassSubmitted", ct.c_uint8),
    ]


class _Decode(ct.Structure):
    _fields_ = [("structSize", c_sz), ("pPriv", c_vp), ("pRangeProfilerObject", c_vp), ("numOfRangeDropped", c_sz)]


class _CDSize(ct.Structure):
    _fields_ = [
        ("structSize", c_sz),
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("pMetricNames", ct.POINTER(ct.c_char_p)),
        ("numMetrics", c_sz),
        ("maxNumOfRanges", c_sz),
        ("maxNumRangeTreeNodes", ct.c_uint32),
        ("counterDataSize", c_sz),
    ]


class _CDInit(ct.Structure):
    _fields_ = [
        ("structSize", c_sz),
        ("pPriv", c_vp),
        ("pRangeProfilerObject", c_vp),
        ("counterDataSize", c_sz),
        ("pCounterData", c_vp),
    ]


class _CDInfo(ct.Structure):
    _fields_ = [
        ("structSize", c_sz),
        ("pPriv", c_vp),
        ("pCounterDataImage", c_vp),
        ("counterDataImageSize", c_sz),
        ("numTotalRanges", c_sz),
    ]


AUTO_RANGE, USER_RANGE = 1, 2  # CUpti_ProfilerRange
KERNEL_REPLAY, USER_REPLAY = 2, 3  # CUpti_ProfilerReplayMode (1 = Application)


def _p(cls, **kw):  # structSize = offsetof(last field) + sizeof(last field), like the C *_STRUCT_SIZE macros
    name, typ = cls._fields_[-1]
    s = cls(**kw)
    s.structSize = getattr(cls, name).offset + ct.sizeof(typ)
    return s


class RangeProfiler:
    def __init__(self, ctx_ptr: int, metrics, max_ranges=1024, device_index=0):
        p = C.ProfilerInitializeParams()
        p.struct_size = C.PROFILER_INITIALIZE_PARAMS_STRUCT_SIZE
        C.profiler_initialize(p.ptr)  # also makes cupti-python dlopen libcupti.so.13
        self.lib = lib = ct.CDLL("libcupti.so.13")  # by soname -> the copy already mapped
        for f in (
            "Enable",
            "Disable",
            "SetConfig",
            "Start",
            "Stop",
            "DecodeData",
            "GetCounterDataSize",
            "CounterDataImageInitialize",
            "GetCounterDataInfo",
        ):
            getattr(lib, "cuptiRangeProfiler" + f).restype = ct.c_int
        cn = C.DeviceGetChipNameParams()
        cn.struct_size = C.DEVICE_GET_CHIP_NAME_PARAMS_STRUCT_SIZE
        cn.device_index = device_index
        C.device_get_chip_name(cn.ptr)
        self.chip, self.metrics = cn.p_chip_name, list(metrics)  # "GH100" on H100/H200
        # libcupti 13.0's Host_Initialize_Params ends at pHostObject (48 bytes); cupti-python 13.4 sends the 13.4 size
        C.PROFILER_HOST_INITIALIZE_PARAMS_STRUCT_SIZE = 48
        self.host = ph.ProfilerHost(self.chip, ph.ProfilerType.RANGE_PROFILER)
        self.host.initialize()
        self.config = self.host.create_config_image(self.metrics)  # np.uint8 array
        self.num_passes = ph.get_num_of_passes(self.config)
        e = _p(_Enable, ctx=ctx_ptr)
        self._ck(lib.cuptiRangeProfilerEnable(ct.byref(e)), "Enable")
        self.obj = e.pRangeProfilerObject
        names = (ct.c_char_p * len(self.metrics))(*[m.encode() for m in self.metrics])
        s = _p(
            _CDSize,
            pRangeProfilerObject=self.obj,
            pMetricNames=names,
            numMetrics=len(self.metrics),
            maxNumOfRanges=max_ranges,
            maxNumRangeTreeNodes=max_ranges,
        )
        self._ck(lib.cuptiRangeProfilerGetCounterDataSize(ct.byref(s)), "GetCounterDataSize")
        self.image = np.zeros(s.counterDataSize, dtype=np.uint8)
        i = _p(
            _CDInit, pRangeProfilerObject=self.obj, counterDataSize=self.image.size, pCounterData=self.image.ctypes.data
        )
        self._ck(lib.cuptiRangeProfilerCounterDataImageInitialize(ct.byref(i)), "CounterDataImageInitialize")
        self.max_ranges = max_ranges

    def _ck(self, rc, what):
        if rc != 0:
            raise RuntimeError(f"cuptiRangeProfiler{what} failed: {C.Result(rc).name} ({rc})")

    def set_config(self, replay=KERNEL_REPLAY, rng=AUTO_RANGE):
        c = _p(
            _SetConfig,
            pRangeProfilerObject=self.obj,
            configSize=self.config.size,
            pConfig=self.config.ctypes.data,
            counterDataImageSize=self.image.size,
            pCounterDataImage=self.image.ctypes.data,
            range=rng,
            replayMode=replay,
            maxRangesPerPass=self.max_ranges,
            numNestingLevels=1,
            minNestingLevel=1,
            passIndex=0,
            targetNestingLevel=0,
        )  # values as in NVIDIA's CUPTI tutorial 5.4.4
        self._ck(self.lib.cuptiRangeProfilerSetConfig(ct.byref(c)), "SetConfig")

    def start(self):
        self._ck(self.lib.cuptiRangeProfilerStart(ct.byref(_p(_Obj, pRangeProfilerObject=self.obj))), "Start")

    def stop(self) -> bool:  # True once every pass was submitted
        s = _p(_Stop, pRangeProfilerObject=self.obj)
        self._ck(self.lib.cuptiRangeProfilerStop(ct.byref(s)), "Stop")
        return bool(s.isAllPassSubmitted)

    def results(self):
        d = _p(_Decode, pRangeProfilerObject=self.obj)
        self._ck(self.lib.cuptiRangeProfilerDecodeData(ct.byref(d)), "DecodeData")
        info = _p(_CDInfo, pCounterDataImage=self.image.ctypes.data, counterDataImageSize=self.image.size)
        self._ck(self.lib.cuptiRangeProfilerGetCounterDataInfo(ct.byref(info)), "GetCounterDataInfo")
        rows = [
            dict(zip(self.metrics, self.host.evaluate_metric_values(self.image, self.metrics, r), strict=False))
            for r in range(info.numTotalRanges)
        ]
        return rows, d.numOfRangeDropped

    def close(self):
        self.lib.cuptiRangeProfilerDisable(ct.byref(_p(_Obj, pRangeProfilerObject=self.obj)))
        self.host.deinitialize()
        p = C.ProfilerDeInitializeParams()
        p.struct_size = C.PROFILER_DEINITIALIZE_PARAMS_STRUCT_SIZE
        C.profiler_deinitialize(p.ptr)  # once per process (torch notes a 2nd call segfaults)


if __name__ == "__main__":
    import torch
    from cuda.bindings import driver as cu

    x = torch.randn(4096, 4096, device="cuda")
    torch.cuda.synchronize()  # primary ctx exists
    err, ctx = cu.cuCtxGetCurrent()
    assert int(err) == 0
    metrics = [
        "gpu__time_duration.sum",
        "dram__bytes_read.sum",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed",
        "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__warps_active.avg.pct_of_peak_sustained_active",
    ]
    rp = RangeProfiler(int(ctx), metrics)
    print(rp.chip, "passes:", rp.num_passes)
    # (a) kernel replay: one start/stop, CUPTI replays each kernel num_passes times (saves/restores memory)
    rp.set_config(KERNEL_REPLAY, AUTO_RANGE)
    rp.start()
    y = x @ x
    z = torch.relu(y)
    torch.cuda.synchronize()
    rp.stop()
    # (b) user replay instead: rp.set_config(USER_REPLAY, AUTO_RANGE); then
    #     while True: reset_inputs(); rp.start(); workload(); torch.cuda.synchronize();  if rp.stop(): break
    rows, dropped = rp.results()
    for i, r in enumerate(rows):
        print(i, r)
    print("dropped ranges:", dropped)
    rp.close()
