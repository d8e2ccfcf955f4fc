#pragma once
#include <string>

namespace pipelink::tools {

struct OpsOptions {
  std::string arch;
  bool json = false;
};
int cmd_ops(const OpsOptions& o);

struct DemoOptions {
  std::string workload = "arxiv-like";
  int repeats = 5;
  std::string device = "auto";  // auto: the GPU where one answers, else the CPU; or cpu, cuda[:N]
};
int cmd_demo(const DemoOptions& o);

struct AggregateFileOptions {
  std::string graph, x, w, out;
  std::string transform = "tanh";
  std::string device = "cpu";
  bool check = false;
};
int cmd_aggregate(const AggregateFileOptions& o);

}  // namespace pipelink::tools
