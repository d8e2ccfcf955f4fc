#!/usr/bin/env bash
# What README.md promises of an install, checked: `cmake --install` into a fresh prefix, the
# installed `pipelink` runs from there (it needs its RPATH to find libpipelink: it failed before
# session 46), and a project of its own finds the library with find_package(PipeLink) and runs
# the README's C++ example on a small graph.
# usage: install_check.sh BUILD_DIR [GENERATOR]
set -euo pipefail
build=$1
gen=${2:-Ninja}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build" --prefix "$work/prefix" >/dev/null
"$work/prefix/bin/pipelink" ops > "$work/ops.txt"  # (not piped into grep -q: SIGPIPE under pipefail)
grep -q "aggregate v1" "$work/ops.txt" || { echo "installed pipelink did not list its ops"; exit 1; }
mkdir "$work/app"
cat > "$work/app/CMakeLists.txt" <<'CM'
cmake_minimum_required(VERSION 3.25)
project(pipelink_consumer CXX)
find_package(PipeLink REQUIRED)
add_executable(app main.cpp)
target_link_libraries(app PRIVATE PipeLink::pipelink)
CM
cat > "$work/app/main.cpp" <<'CPP'
// README.md's "Using it from C++", on a three-edge graph: row 1 gets tanh(x[0]) + tanh(x[2]).
#include <pipelink/pipelink.hpp>

#include <cmath>
#include <cstdio>
#include <fstream>
using namespace pipelink;

int main(int, char** argv) {
  const std::string dir = argv[1];
  std::ofstream(dir + "/graph.txt") << "0 1\n2 1\n1 0\n";
  Tensor x0 = TensorBuilder().shape({3, 2}).dtype(DType::f32).build();
  for (int i = 0; i < 6; ++i) x0.data_as<float>()[i] = 0.1f * float(i + 1);
  write_npy(dir + "/x.npy", x0);

  EdgeList g = load_graph(dir + "/graph.txt");
  Tensor x = read_npy(dir + "/x.npy");
  Tensor out = TensorBuilder().shape({x.dim(0), x.dim(1)}).dtype(DType::f32).build();
  aggregate(x, g.src, g.dst, /*w=*/std::nullopt, out, {.transform = Transform::tanh});
  const float want = std::tanh(0.1f) + std::tanh(0.5f), got = out.data_as<float>()[2];
  std::printf("out[1][0] = %.7f (want %.7f)\n", double(got), double(want));
  return std::fabs(got - want) < 1e-6f ? 0 : 1;
}
CPP
cmake -S "$work/app" -B "$work/app/build" -G "$gen" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build "$work/app/build" >/dev/null
"$work/app/build/app" "$work"
echo "install_check: OK"
