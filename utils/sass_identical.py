"""Kernel sources that changed since a device's records ran, and were shown to compile to the same machine code.

A record names the kernel sources it ran (utils.results.kernel_drift). When a source changes only in its form (a
type that names what was inline, a header split in two) a comparison of the SASS before and after shows that the
record measured the same kernels: utils/report/readme.py then says so beside the record instead of asking for a
new run, and tests/test_record_provenance.py checks each file against its log (every function the log compared in
every kernel file the change reaches: identical or new). experiments/reader_works/sass_identity.py writes the logs.
"""
from __future__ import annotations

_ENGINE_TYPES = ("logs/engine_types/sass_identity.log", [  # the wgmma engine built from types (operand, scheduler, main loops)
    "kernels/common/gemm_wgmma.cuh", "kernels/common/gemm_wgmma_host.cuh", "kernels/common/hopper.cuh"])
# The dispatch (common/gemm_dispatch.cuh) with the narrow tiles beside the kernels of gemm_10 and the fused
# models, the engine written in its operand's k and bytes, and tc::tf32_residual moved into tensor_core.cuh:
# every kernel a record ran is unchanged, and the host's choice changed only at 65-256 rows of x, where no
# record timed `linear` or a whole model.
_MID_BATCH = ("logs/gemm_schedules/sass_identity.log", [
    "kernels/common/tensor_core.cuh", "kernels/common/tf32_operands.cuh", "kernels/common/hopper.cuh",
    "kernels/common/gemm_wgmma.cuh", "kernels/common/gemm_wgmma_host.cuh",
    "kernels/gemm_10_3xtf32.cu", "kernels/fused_gemm_groupnorm.cu"])
# The whole models on the narrow tiles at the TF32 tier (new kernels beside the old) and x padded to whole tiles on
# the narrow tiles (host code): every kernel a record ran is unchanged; the host's choice changed only at 65-256
# rows of x, where no record timed `linear` or a whole model.
_FUSED_NARROW = ("logs/gemm_schedules/sass_identity_506610f.log", [
    "kernels/common/gemm_wgmma.cuh", "kernels/common/gemm_wgmma_host.cuh",
    "kernels/gemm_10_3xtf32.cu", "kernels/fused_gemm_groupnorm.cu"])
# The engine's 16-bit operand traits (bf16, fp16), their wgmma wrappers, and Config as ConfigOf<Tf32Operand, ...>:
# nothing the records ran changed.
_HALF16 = ("logs/bf16/sass_identity_5699b86.log", [
    "kernels/common/hopper.cuh", "kernels/common/gemm_wgmma.cuh"])  # (gemm_wgmma_types.cuh is newer than the records)
# The wgmma wrappers written from one macro, the kernel's writer chosen by its epilogue (WriterOf), the float
# writer as DirectWriterOf<float>: the same machine code again.
_HALF16_FOLD = ("logs/bf16/sass_identity_d09d1dd.log", ["kernels/common/hopper.cuh", "kernels/common/gemm_wgmma.cuh",
                                                          "kernels/common/gemm_wgmma_writers.cuh"])
# The whole-model epilogue templated on its parameters' and output's element (float by default, so its float
# instances mangle as before with two more template arguments: the comparison renames them back), the writers'
# WriterFor and ParamElement, and check_gemm_shapes split out of check_gemm_inputs: every function of every file
# that includes them, identical (the H200's records ran abdba13's kernels, the comparison's old side).
_EPILOGUE_TYPES = ("logs/bf16/sass_identity_5a73694.log", [
    "kernels/common/gemm_epilogue_groupnorm.cuh", "kernels/common/gemm_wgmma_writers.cuh",
    "kernels/common/gemm_launch.cuh"])
# The 16-bit writers (Quad16Writer, and their WriterFor and ParamElement), which only rung 11 includes: no record
# ran it, so no function of a recorded file can have changed. The H100's records predate the file.
_WRITERS16 = "kernels/common/gemm_wgmma_writers16.cuh"
# The whole models in bf16 and fp16 and under autocast (new kernels beside the old: rung 11's GEMM with the epilogue's
# 16-bit and float32 instances, a 16-bit broadcast write), the launcher's dtype checks and dispatch, the broadcast
# bias's shape check split out, the epilogue's writer for the kept output named apart: every function the
# records ran, identical (from a5935d5's kernels, which the H200's records' SASS entry above already covers).
_DROPINS16 = ("logs/bf16/sass_identity_16bit_dropins.log", [
    "kernels/fused_gemm_groupnorm.cu", "kernels/common/broadcast_add.cuh", "kernels/common/gemm_epilogue_groupnorm.cuh",
    "kernels/common/gemm_wgmma_writers.cuh", "kernels/common/gemm_wgmma_writers16.cuh"])
# The tail backward on a model's 16-bit tensors (the kernels templated on their element, float by default: the
# comparison renames the float instances back), GroupNorm's shape checks split from its dtype check (host code),
# and the whole-model launchers' fallback choice written once (host code): every function the records ran,
# identical (from 2632b28's kernels). The 16-bit accesses' header, which only tail_backward.cu includes, is newer
# than every record.
_TAIL16 = ("logs/bf16/sass_identity_tail16.log", [
    "kernels/tail_backward.cu", "kernels/common/groupnorm.cuh", "kernels/fused_gemm_groupnorm.cu"])
# Under autocast at inference, 16-bit x beside a float32 w routed by the rows of x (host code): the same machine code.
_AUTOCAST_ROWS = ("logs/bf16/sass_identity_autocast_rows.log", [
    "kernels/common/gemm_dispatch.cuh", "kernels/fused_gemm_groupnorm.cu"])
# A model in bf16 or fp16 on the narrow tiles up to 256 rows, and the pad of x in one launch: the same machine
# code, new kernels beside it.
_NARROW16 = ("logs/bf16/sass_identity_narrow16.log", [
    "kernels/common/gemm_dispatch.cuh", "kernels/common/gemm_wgmma_host.cuh", "kernels/fused_gemm_groupnorm.cu"])
# Autocast's call reading w as float32 up to 512 rows (host code), after the change above: the same machine code.
_MIXED512 = ("logs/bf16/sass_identity_mixed512.log", [
    "kernels/common/gemm_dispatch.cuh", "kernels/fused_gemm_groupnorm.cu"])
# The mixed-input GEMM under the whole models (new kernels beside the old), the pad of x to tiles of any height and the
# route by the rows of x (host code): the same machine code, from c83d64b's kernels.
_MIXED_INPUT = ("logs/bf16/sass_identity_mixed_input.log", [
    "kernels/common/gemm_dispatch.cuh", "kernels/common/gemm_wgmma_host.cuh", "kernels/fused_gemm_groupnorm.cu"])
# The ring's barriers made by one function (init_ring) that the mixed-input kernel shares: the same machine code.
_INIT_RING = ("logs/bf16/sass_identity_init_ring.log", ["kernels/common/gemm_wgmma.cuh"])
# device -> [(the log of the comparison, under results/<device>/; the kernel sources it covers)]
SASS_IDENTICAL = {
    "nvidia-h200": [(_EPILOGUE_TYPES[0], [*_EPILOGUE_TYPES[1], _WRITERS16]), _DROPINS16, _TAIL16, _AUTOCAST_ROWS,
                    _NARROW16, _MIXED512, _MIXED_INPUT, _INIT_RING],
    "nvidia-h100-80gb-hbm3": [
        ("../nvidia-h200/" + _ENGINE_TYPES[0], _ENGINE_TYPES[1]),  # one comparison: both build these for sm_90a
        ("../nvidia-h200/" + _MID_BATCH[0], _MID_BATCH[1]),
        ("../nvidia-h200/" + _FUSED_NARROW[0], _FUSED_NARROW[1]),
        ("../nvidia-h200/" + _HALF16[0], _HALF16[1]),
        ("../nvidia-h200/" + _HALF16_FOLD[0], _HALF16_FOLD[1]),
        ("../nvidia-h200/" + _EPILOGUE_TYPES[0], _EPILOGUE_TYPES[1]),
        ("../nvidia-h200/" + _DROPINS16[0], [f for f in _DROPINS16[1] if f != _WRITERS16]),  # (newer than its records)
        ("../nvidia-h200/" + _TAIL16[0], _TAIL16[1]),
        ("../nvidia-h200/" + _AUTOCAST_ROWS[0], ["kernels/fused_gemm_groupnorm.cu"]),  # (no record ran the header)
        ("../nvidia-h200/" + _NARROW16[0], [f for f in _NARROW16[1] if f != "kernels/common/gemm_dispatch.cuh"]),
        ("../nvidia-h200/" + _MIXED512[0], ["kernels/fused_gemm_groupnorm.cu"]),
        ("../nvidia-h200/" + _MIXED_INPUT[0], [f for f in _MIXED_INPUT[1] if f != "kernels/common/gemm_dispatch.cuh"]),
        ("../nvidia-h200/" + _INIT_RING[0], _INIT_RING[1]),
        ("logs/host_headers/sass_identity_4da733a.log", [
            "kernels/activations.cu", "kernels/groupnorm.cu", "kernels/gemm_07_pipelined.cu",
            "kernels/gemm_08_mma_tf32.cu", "kernels/common/gemm_pipelined.cuh", "kernels/common/gemm_mma.cuh",
            "kernels/common/check.cuh", "kernels/gemm_10_3xtf32.cu", "kernels/fused_gemm_groupnorm.cu"]),
        # the small-batch schedule added beside the kernels of gemm_10 and the fused models
        ("logs/small_batch/linear/sass_identity_4da733a.log", [
            "kernels/gemm_10_3xtf32.cu", "kernels/fused_gemm_groupnorm.cu"]),
    ],
}


def sass_identical(device: str) -> dict[str, str]:
    """{kernel source path: the log that shows it compiles to the same SASS} for a device's records."""
    return {path: log for log, paths in SASS_IDENTICAL.get(device, []) for path in paths}
