// Smallest use of the fused aggregate: a 4-node ring, tanh, checked against the float64 oracle.
#include <pipelink/pipelink.hpp>

#include <cstdio>

int main() {
  using namespace pipelink;
  Tensor src = TensorBuilder().shape({4}).dtype(DType::i64).build();
  Tensor dst = TensorBuilder().shape({4}).dtype(DType::i64).build();
  for (std::int64_t e = 0; e < 4; ++e) {
    src.data_as<std::int64_t>()[e] = e;
    dst.data_as<std::int64_t>()[e] = (e + 1) % 4;
  }
  Tensor x = TensorBuilder().shape({4, 3}).build();
  fill_normal(x, 7);
  Tensor out = TensorBuilder().shape({4, 3}).build();
  aggregate(x, src, dst, std::nullopt, out);
  VerifyReport r = verify_aggregate(out, aggregate_oracle(x, src, dst, std::nullopt));
  std::printf("consumer: %s\n", r.summary().c_str());
  return r.within_tolerance ? 0 : 1;
}
