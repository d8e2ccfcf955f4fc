#!/usr/bin/env python3
"""Instruction counts of kernels in a CUDA object, from `cuobjdump -sass` (the GPU machine has it).

    scripts/sass-ops.py build/gpu/src/CMakeFiles/pipelink_cuda.dir/cuda/aggregate.cu.o 'staged_rows_kernelILi1ELi2ELi[23]E'

Prints, for each kernel whose mangled name matches the regex, its instruction count and its
opcodes by count (the base opcode: LDGSTS.E.BYPASS.128 counts as LDGSTS). Why: the staged walk
is issue-bound (perf-notes v11, v22), so instructions an edge are its cost model.
"""
import collections
import re
import subprocess
import sys


def main() -> int:
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    obj, pattern = sys.argv[1], re.compile(sys.argv[2])
    sass = subprocess.run(["cuobjdump", "-sass", obj], check=True, capture_output=True, text=True).stdout
    found = 0
    for block in re.split(r"\n\s*Function : ", sass)[1:]:
        name = block.split("\n", 1)[0].strip()
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
