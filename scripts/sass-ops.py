#!/usr/bin/env python3
"""Instruction counts of kernels in a CUDA object or cubin.

    scripts/sass-ops.py build/gpu/src/CMakeFiles/pipelink_cuda.dir/cuda/aggregate_walk.cu.o 'staged_rows_kernelILi1ELi2ELi2ELi(n1|3)E'
    nvcc -Iinclude -Isrc -O3 -DNDEBUG -arch=sm_90 -cubin --expt-relaxed-constexpr -std=c++20 src/cuda/aggregate_walk.cu -o /tmp/a.cubin
    NVDISASM=/path/to/nvdisasm scripts/sass-ops.py /tmp/a.cubin 'staged_rows_kernel'

An object goes through `cuobjdump -sass` (the GPU machine has it), a `.cubin` through `nvdisasm -c`
(NVDISASM, else on PATH; where the toolkit lacks it, as on the CPU machines, PyPI's
`nvidia-cuda-nvdisasm` wheel carries it). Prints, for each kernel whose mangled name matches the
regex, its instruction count (static, with the padding after EXIT) and its opcodes by count (the
base opcode: LDGSTS.E.BYPASS.128 counts as LDGSTS). Why: the staged walk is issue-bound
(perf-notes v11, v22, v28), so instructions an edge are its cost model.
"""
import collections
import os
import re
import subprocess
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    obj, pattern = sys.argv[1], re.compile(sys.argv[2])
    if obj.endswith(".cubin"):
        tool = [os.environ.get("NVDISASM", "nvdisasm"), "-c", obj]
        split = r"\n//-+ \.text\."  # nvdisasm: a section a kernel, "//---- .text.<name> ----"
    else:
        tool = ["cuobjdump", "-sass", obj]
        split = r"\n\s*Function : "
    sass = subprocess.run(tool, check=True, capture_output=True, text=True).stdout
    found = 0
    for block in re.split(split, sass)[1:]:
        name = block.split("\n", 1)[0].strip().split()[0]
        if not pattern.search(name):
            continue
        found += 1
        ops = [m.group(1) for m in re.finditer(r"/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_]*)", block)]
        hist = collections.Counter(ops)
        print(f"{name}: {len(ops)} instructions")
        print("  " + " ".join(f"{op}:{n}" for op, n in hist.most_common()))
    if not found:
        print(f"no kernel matches {pattern.pattern}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
