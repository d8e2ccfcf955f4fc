#pragma once
// Graphs: seeded generators for the named workloads and loaders for SNAP / Matrix Market files.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "pipelink/tensor.hpp"

namespace pipelink {

/// Edge e carries a message from src[e] to dst[e]. src/dst are [E] int32 or int64 CPU tensors.
struct EdgeList {
  Tensor src;
  Tensor dst;
  Tensor weight;  // [E] float32 when the source carries edge values (Matrix Market real/integer)
  std::int64_t num_nodes = 0;
  std::int64_t num_edges() const { return src.numel(); }
};

enum class EdgeOrder : std::uint8_t { random, dst_sorted };
std::string_view edge_order_name(EdgeOrder o) noexcept;
EdgeOrder parse_edge_order(std::string_view s);  // "random" | "dst-sorted"

/// E edges with src, dst uniform in [0, N). Deterministic for a seed.
EdgeList uniform_graph(std::int64_t num_nodes, std::int64_t num_edges, std::uint64_t seed,
                       DType index_dtype = DType::i64);
/// R-MAT over N = 2^scale nodes with quadrant probabilities a, b, c (d = 1 - a - b - c).
EdgeList rmat_graph(int scale, std::int64_t num_edges, double a, double b, double c,
                    std::uint64_t seed, DType index_dtype = DType::i64);
/// Stable reorder of the edges by destination.
void sort_by_destination(EdgeList& g);
/// Renames the nodes by a random permutation of [0, num_nodes) drawn from `seed` (src and dst
/// alike, in place): the graph's shape (degrees, hubs) stays, only where its hubs sit among the
/// ids changes. R-MAT puts its hubs at the low ids; real graphs rarely do. Throws
/// IndexOutOfRangeError naming the first edge whose index is outside [0, num_nodes), with the
/// edges unchanged.
void relabel_nodes(EdgeList& g, std::uint64_t seed);

/// A named workload of PROTOCOL.md §1.
struct WorkloadSpec {
  std::string name;
  std::int64_t num_nodes = 0;
  std::int64_t num_edges = 0;
  bool rmat = false;
  int rmat_scale = 0;
  double a = 0, b = 0, c = 0;
  std::int64_t features = 64;
  std::string why;
  // Not part of the named workloads: the nodes renamed by a random permutation after generation
  // (relabel_nodes), so that R-MAT's hubs sit at random ids (`pipelink bench aggregate --relabel`).
  bool relabel = false;
};
const std::vector<WorkloadSpec>& named_workloads();
/// Throws LookupError listing the names.
const WorkloadSpec& workload_spec(std::string_view name);
/// `spec` with its edge count scaled, nodes kept: llround(E x edge_scale), at least 1 (what
/// `pipelink bench aggregate --edge-scale` and Python's `pipelink.workload` take). Throws
/// std::invalid_argument where edge_scale is not a positive number or gives more than 2^40 edges:
/// no machine holds that graph, and 1e300 once overflowed llround into E = 1 (session 46).
WorkloadSpec scale_edges(WorkloadSpec spec, double edge_scale);

struct WorkloadData {
  WorkloadSpec spec;
  EdgeOrder order = EdgeOrder::random;
  EdgeList graph;
  Tensor x;  // [N, F] float32, N(0, 1)
  Tensor w;  // [E] float32, U(-1, 1)
};
/// Builds the graph and features for a workload (features/edges may be scaled for tests).
WorkloadData make_workload(const WorkloadSpec& spec, EdgeOrder order, std::uint64_t seed = 42,
                           DType index_dtype = DType::i64);

/// Fills a float tensor with N(0,1) / U(lo,hi) values, deterministic for a seed.
void fill_normal(const TensorView& v, std::uint64_t seed);
void fill_uniform(const TensorView& v, double lo, double hi, std::uint64_t seed);

/// SNAP edge list: '#' comment lines, then "a b" per line (whitespace-separated, extra columns
/// ignored): an edge from a to b. num_nodes = max id + 1 unless `num_nodes` > 0 is given.
/// Throws ParseError with file and line on malformed lines or negative ids.
EdgeList load_snap(const std::string& path, std::int64_t num_nodes = 0);
/// Matrix Market "coordinate" file (pattern/real/integer, general/symmetric). 1-based ids:
/// entry (i, j) is an edge from j-1 to i-1 (row = destination, as in A·x). Symmetric files give
/// both directions. Throws ParseError.
EdgeList load_matrix_market(const std::string& path);
/// Picks by content: a "%%MatrixMarket" header means Matrix Market, anything else SNAP.
EdgeList load_graph(const std::string& path, std::int64_t num_nodes = 0);
/// Which end of an edge graph_edge_line checks.
enum class GraphEndpoint : std::uint8_t { any, src, dst };
/// The 1-based line of `path` whose entry gave edge `edge` (counting from 0) of load_graph(path):
/// a symmetric Matrix Market entry gives two edges, both its line. 0 when the file has no such
/// edge, is not a regular file (a pipe cannot be read twice), can no longer be read, or (unless
/// `endpoint` is any) that edge's `endpoint` is not `value` (the file changed since it was
/// loaded). For error messages: it reads the file again, counting edges up to that one.
std::int64_t graph_edge_line(const std::string& path, std::int64_t edge, GraphEndpoint endpoint = GraphEndpoint::any,
                             std::int64_t value = 0);

}  // namespace pipelink
