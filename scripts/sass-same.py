#!/usr/bin/env python3
"""Whether two builds hold the same kernel code: the SASS of every function, names set aside.

    scripts/sass-same.py OLD.o [OLD2.o ...] -- NEW.o [NEW2.o ...]
    e.g. (the walk's split, perf-notes v53):
    scripts/sass-same.py /tmp/old/aggregate.cu.o -- build/cuda/src/CMakeFiles/pipelink_cuda.dir/cuda/aggregate.cu.o \\
        build/cuda/src/CMakeFiles/pipelink_cuda.dir/cuda/aggregate_walk.cu.o

Each side's objects go through `cuobjdump -sass` (CUOBJDUMP, else on PATH; it needs nvdisasm on
PATH, which PyPI's `nvidia-cuda-nvdisasm` wheel carries where the toolkit lacks it). A function's
body is its instructions as printed, relative branch targets included, with the encoding comments
and every mangled symbol (a callee, a relocation) replaced by one word: code moved between
translation units or namespaces keeps its body, while its mangled name changes (an anonymous
namespace's name holds its file's). The two sides' bodies are compared as multisets.
Why: a refactor that moves kernels (or changes only host code) should leave every body as it was;
this says so without a GPU. Exit 0: the same bodies, as often on each side; 1: not, with the
functions whose bodies are on one side only; 2: usage or tool errors.
"""
import collections
import hashlib
import os
import re
import subprocess
import sys


def bodies(obj: str) -> list[tuple[str, str]]:
    tool = os.environ.get("CUOBJDUMP", "cuobjdump")
    text = subprocess.run([tool, "-sass", obj], check=True, capture_output=True, text=True).stdout
    out, name, body = [], None, []
    for line in text.splitlines():
        m = re.search(r"Function : (\S+)", line)
        if m:
            if name:
                out.append((name, "\n".join(body)))
            name, body = m.group(1), []
            continue
        if name is None:
            continue
        s = re.sub(r"/\* 0x[0-9a-f]{16} \*/", "", line).strip()
        s = re.sub(r"_Z\S+", "SYM", s)
        if s:
            body.append(s)
    if name:
        out.append((name, "\n".join(body)))
    return out


def side(objs: list[str]) -> tuple[collections.Counter, dict[str, str]]:
    count, names = collections.Counter(), {}
    for o in objs:
        for name, body in bodies(o):
            h = hashlib.sha1(body.encode()).hexdigest()
            count[h] += 1
            names.setdefault(h, name)
    return count, names


def main() -> int:
    args = sys.argv[1:]
    if "--" not in args or args.index("--") == 0 or args.index("--") == len(args) - 1:
        print(__doc__)
        return 2
    k = args.index("--")
    try:
        (a, an), (b, bn) = side(args[:k]), side(args[k + 1:])
    except (OSError, subprocess.CalledProcessError) as e:
        print(f"sass-same: {e}", file=sys.stderr)
        return 2
    only_a, only_b = a - b, b - a
    print(f"sass-same: {sum(a.values())} functions before, {sum(b.values())} after; "
          f"{sum(only_a.values())} bodies only before, {sum(only_b.values())} only after")
    for h in only_a:
        print(f"  only before: {an[h]}")
    for h in only_b:
        print(f"  only after:  {bn[h]}")
    return 0 if not only_a and not only_b else 1


if __name__ == "__main__":
    sys.exit(main())
