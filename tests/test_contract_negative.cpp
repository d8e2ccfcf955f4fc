// Negative suites for every registered op, generated from the op's own contract (CV-CUDA's
// OpX_Negative, built once): starting from a valid call, each contract field of each port is
// violated once and the exact error fields are checked. A new op gets its suite by adding one
// valid sample below.
#include <functional>

#include "test_util.hpp"

namespace pipelink::test {
namespace {

struct Sample {
  std::string op;
  std::function<PortMap(std::vector<Tensor>&)> make;  // keeps owning tensors alive in the vector
  Attrs attrs;
};

Tensor keep(std::vector<Tensor>& store, Tensor t) {
  store.push_back(t);
  return t;
}
TensorView rand_f(std::vector<Tensor>& s, std::vector<std::int64_t> shape, Layout l = Layout::unspecified) {
  Tensor t = keep(s, random_tensor(std::move(shape), DType::f32, fresh_seed(), 0.0, 1.0));
  return t.view().with_layout(l);
}
TensorView rand_idx(std::vector<Tensor>& s, std::int64_t n, std::int64_t bound) {
  EdgeList g = uniform_graph(bound, n, fresh_seed());
  return keep(s, g.src).view();
}

std::vector<Sample> samples() {
  const std::int64_t N = 13, E = 40, F = 6;
  return {
      {"aggregate",
       [=](auto& s) {
         return PortMap{{"x", rand_f(s, {N, F})}, {"src", rand_idx(s, E, N)}, {"dst", rand_idx(s, E, N)},
                        {"w", rand_f(s, {E})}, {"out", rand_f(s, {N, F})}};
       },
       {{"transform", std::string("tanh")}, {"accumulate", false}}},
      {"gather_scale",
       [=](auto& s) {
         return PortMap{{"x", rand_f(s, {N, F})}, {"src", rand_idx(s, E, N)}, {"w", rand_f(s, {E})},
                        {"m", rand_f(s, {E, F})}};
       },
       {}},
      {"map", [=](auto& s) { return PortMap{{"in", rand_f(s, {E, F})}, {"out", rand_f(s, {E, F})}}; },
       {{"transform", std::string("relu")}}},
      {"index_add",
       [=](auto& s) {
         return PortMap{{"out", rand_f(s, {N, F})}, {"dst", rand_idx(s, E, N)}, {"values", rand_f(s, {E, F})}};
       },
       {}},
      {"sobel_3x3",
       [](auto& s) {
         return PortMap{{"in", rand_f(s, {2, 5, 7, 3}, Layout::nhwc)}, {"out", rand_f(s, {2, 5, 7, 1}, Layout::nhwc)}};
       },
       {}},
      {"gamma_correct", [](auto& s) { return PortMap{{"in", rand_f(s, {50})}, {"out", rand_f(s, {50})}}; },
       {{"gamma", 2.2}}},
  };
}

// A fresh random tensor like `like` but with another shape or dtype (valid index values).
TensorView remake(std::vector<Tensor>& s, const TensorView& like, std::vector<std::int64_t> shape, DType t) {
  Tensor n = keep(s, TensorBuilder().shape(shape).dtype(t).zeros());
  if (is_floating(t)) fill_uniform(n, 0.0, 1.0, fresh_seed());
  return n.view().with_layout(like.layout());
}

// The port at which a disagreement introduced at `p` is reported: `p` itself when an earlier
// present port shares the property, else the next present port that shares it.
std::string reported_at(const OpDef& def, const PortMap& m, const PortContract& p,
                        const std::function<bool(const PortContract&)>& shares) {
  bool earlier = false;
  for (const auto& q : def.ports) {
    if (&q == &p) break;
    if (m.count(q.name) && shares(q)) earlier = true;
  }
  if (earlier) return p.name;
  bool after = false;
  for (const auto& q : def.ports) {
    if (after && m.count(q.name) && shares(q)) return q.name;
    if (&q == &p) after = true;
  }
  return "";
}

struct Expect {
  std::string port, field;
  bool origin_known = false;
};

void expect_violation(const Sample& smp, const PortMap& ports, const Attrs& attrs, const Expect& ex,
                      const std::string& what) {
  SCOPED_TRACE(smp.op + ": " + what);
  try {
    invoke(smp.op, ports, attrs);
    ADD_FAILURE() << "no ContractViolationError";
  } catch (const ContractViolationError& e) {
    EXPECT_EQ(e.op(), smp.op);
    EXPECT_EQ(e.port(), ex.port) << e.what();
    EXPECT_EQ(e.field(), ex.field) << e.what();
    EXPECT_FALSE(e.expected().empty());
    EXPECT_FALSE(e.actual().empty());
    EXPECT_NE(e.expected(), e.actual());
    if (ex.origin_known) {
      EXPECT_TRUE(e.origin().known()) << e.what();
      EXPECT_NE(std::string(e.what()).find("test_contract_negative.cpp"), std::string::npos) << e.what();
    }
  }
}

class ContractNegative : public ::testing::TestWithParam<std::string> {};

TEST_P(ContractNegative, EachFieldViolatedOnce) {
  Sample smp;
  for (auto& s : samples())
    if (s.op == GetParam()) smp = s;
  const OpDef& def = Registry::global().op(smp.op);
  std::vector<Tensor> store;
  const PortMap valid = smp.make(store);
  ASSERT_NO_THROW(invoke(smp.op, valid, smp.attrs)) << "the valid sample must run";
  int violations = 0;

  for (const PortContract& p : def.ports) {
    if (!valid.count(p.name)) continue;
    const TensorView v = valid.at(p.name);
    std::vector<std::int64_t> shape(v.shape().begin(), v.shape().end());

    if (!p.optional) {  // presence
      PortMap m = valid;
      m.erase(p.name);
      expect_violation(smp, m, smp.attrs, {p.name, "presence"}, "missing " + p.name);
      ++violations;
    }
    if (v.numel() > 0) {  // presence of data: elements at a null address (crashed a kernel before)
      PortMap m = valid;
      m[p.name] = TensorView(nullptr, v.dtype(), v.device(), shape,
                             std::vector<std::int64_t>(v.strides().begin(), v.strides().end()));
      expect_violation(smp, m, smp.attrs, {p.name, "presence"}, "null " + p.name);
      ++violations;
    }
    {  // rank
      PortMap m = valid;
      auto s2 = shape;
      s2.push_back(1);
      m[p.name] = remake(store, v, s2, v.dtype());
      expect_violation(smp, m, smp.attrs, {p.name, "rank", true}, "rank of " + p.name);
      ++violations;
    }
    for (std::size_t d = 0; d < p.shape.size(); ++d) {  // shape: a fixed dim, or a shared symbol
      const Dim& dim = p.shape[d];
      if (dim.kind == Dim::Kind::any) continue;
      std::string at = p.name;
      if (dim.kind == Dim::Kind::symbol) {
        at = reported_at(def, valid, p, [&](const PortContract& q) {
          return std::any_of(q.shape.begin(), q.shape.end(), [&](const Dim& x) { return x.symbol == dim.symbol; });
        });
        if (at.empty()) continue;  // symbol used by this port only
      }
      PortMap m = valid;
      auto s2 = shape;
      s2[d] += 1;
      m[p.name] = remake(store, v, s2, v.dtype());
      expect_violation(smp, m, smp.attrs, {at, "shape"}, "dim " + std::to_string(d) + " of " + p.name);
      ++violations;
    }
    for (DType t : {DType::f32, DType::f64, DType::i32, DType::i64, DType::u8}) {  // dtype outside the list
      if (std::find(p.dtypes.begin(), p.dtypes.end(), t) != p.dtypes.end()) continue;
      PortMap m = valid;
      m[p.name] = remake(store, v, shape, t);
      expect_violation(smp, m, smp.attrs, {p.name, "dtype", true}, "dtype of " + p.name);
      ++violations;
      break;
    }
    if (!p.dtype_group.empty() && p.dtypes.size() > 1) {  // dtype allowed but disagreeing with its group
      const DType other = p.dtypes[0] == v.dtype() ? p.dtypes[1] : p.dtypes[0];
      const std::string at = reported_at(def, valid, p, [&](const PortContract& q) { return q.dtype_group == p.dtype_group; });
      if (!at.empty()) {
        PortMap m = valid;
        m[p.name] = remake(store, v, shape, other);
        expect_violation(smp, m, smp.attrs, {at, "dtype"}, "dtype group of " + p.name);
        ++violations;
      }
    }
    if (p.layout != Layout::unspecified) {  // layout
      PortMap m = valid;
      m[p.name] = v.with_layout(p.layout == Layout::nchw ? Layout::nhwc : Layout::nchw);
      expect_violation(smp, m, smp.attrs, {p.name, "layout"}, "layout of " + p.name);
      ++violations;
    }
    if (const std::size_t need = p.alignment ? p.alignment : v.itemsize(); need > 1) {  // alignment
      const auto bytes = std::int64_t(v.numel()) * std::int64_t(v.itemsize()) + std::int64_t(need);
      Tensor raw = keep(store, TensorBuilder().shape({bytes}).dtype(DType::u8).alignment(64).zeros());
      std::memcpy(static_cast<std::byte*>(raw.data()) + need / 2, v.data(), std::size_t(bytes) - need);
      PortMap m = valid;
      m[p.name] = TensorView(raw.data(), v.dtype(), v.device(), shape, {}, std::int64_t(need / 2), v.layout(),
                             raw.view().origin());
      expect_violation(smp, m, smp.attrs, {p.name, "alignment", true}, "alignment of " + p.name);
      ++violations;
    }
    if (p.contiguity != Contiguity::any) {  // contiguity: double the stride of the innermost dim > 1
      int d = v.rank() - 1;
      if (p.contiguity == Contiguity::contiguous)
        while (d >= 0 && v.dim(d) <= 1) --d;
      if (d >= 0 && v.dim(d) > 1 && (p.contiguity == Contiguity::contiguous || d == v.rank() - 1)) {
        auto s2 = shape;
        s2[std::size_t(d)] *= 2;
        TensorView big = remake(store, v, s2, v.dtype());
        std::vector<std::int64_t> strides(big.strides().begin(), big.strides().end());
        strides[std::size_t(d)] *= 2;
        PortMap m = valid;
        m[p.name] = TensorView(big.base(), v.dtype(), v.device(), shape, strides, 0, v.layout(), big.origin());
        expect_violation(smp, m, smp.attrs, {p.name, "contiguity", true}, "contiguity of " + p.name);
        ++violations;
      }
    }
    {  // device: another device kind (never dereferenced: the check comes first)
      PortMap m = valid;
      m[p.name] = TensorView(v.base(), v.dtype(), Device::cuda(0), shape, {}, v.byte_offset(), v.layout(), v.origin());
      Expect ex{p.name, "device"};
      if (p.device_kinds & device_bit(DeviceKind::cuda)) {
        ex.field = "cross_device";
        ex.port = reported_at(def, valid, p, [](const PortContract& q) { return !q.cross_device; });
      }
      if (!ex.port.empty()) {
        expect_violation(smp, m, smp.attrs, ex, "device of " + p.name);
        ++violations;
      }
    }
    if (p.direction != PortDirection::in) {  // alias: the output shares memory with an input
      for (const PortContract& q : def.ports) {
        if (q.direction != PortDirection::in || !valid.count(q.name)) continue;
        const bool allowed = std::any_of(def.exec.may_alias.begin(), def.exec.may_alias.end(),
                                         [&](auto& pr) { return pr.first == q.name && pr.second == p.name; });
        const TensorView qv = valid.at(q.name);
        const auto qb = qv.numel() * std::int64_t(qv.itemsize()), pb = v.numel() * std::int64_t(v.itemsize());
        Tensor raw = keep(store, TensorBuilder().shape({std::max(qb, pb)}).dtype(DType::u8).zeros());
        std::memcpy(raw.data(), qv.data(), std::size_t(qb));
        PortMap m = valid;
        m[q.name] = TensorView(raw.data(), qv.dtype(), qv.device(), std::vector<std::int64_t>(qv.shape().begin(), qv.shape().end()));
        m[p.name] = TensorView(raw.data(), v.dtype(), v.device(), shape);
        if (allowed) {
          if (qv.dtype() == v.dtype() && qb == pb) {
            EXPECT_NO_THROW(invoke(smp.op, m, smp.attrs)) << "in-place " << q.name;
          }
        } else {
          expect_violation(smp, m, smp.attrs, {p.name, "alias"}, p.name + " aliasing " + q.name);
          ++violations;
        }
        break;
      }
    }
  }
  for (const AttrSpec& a : def.attrs) {  // attributes: wrong kind, and a value outside the choices
    Attrs wrong = smp.attrs;
    wrong[a.name] = std::holds_alternative<std::string>(a.default_value) ? AttrValue(true) : AttrValue(std::string("x"));
    expect_violation(smp, valid, wrong, {a.name, "attribute"}, "kind of attribute " + a.name);
    ++violations;
    if (!a.choices.empty()) {
      Attrs bad = smp.attrs;
      bad[a.name] = std::string("no_such_choice");
      expect_violation(smp, valid, bad, {a.name, "attribute"}, "choice of attribute " + a.name);
      ++violations;
    }
  }
  Attrs unknown = smp.attrs;
  unknown["bogus"] = true;
  expect_violation(smp, valid, unknown, {"bogus", "attribute"}, "unknown attribute");
  PortMap extra = valid;
  extra["bogus_port"] = valid.begin()->second;
  expect_violation(smp, extra, smp.attrs, {"bogus_port", "presence"}, "unknown port");
  RecordProperty("violations", violations);
  EXPECT_GE(violations, 8);
}

std::vector<std::string> sample_ops() {
  std::vector<std::string> names;
  for (auto& s : samples()) names.push_back(s.op);
  return names;
}

INSTANTIATE_TEST_SUITE_P(AllOps, ContractNegative, ::testing::ValuesIn(sample_ops()),
                         [](const auto& param_info) { return param_info.param; });

TEST(ContractNegative, EveryRegisteredOpHasASample) {
  auto names = sample_ops();
  for (const OpDef* d : Registry::global().ops()) {
    if (d->name.rfind("test_", 0) == 0) continue;
    EXPECT_NE(std::find(names.begin(), names.end(), d->name), names.end()) << d->name << " has no negative suite";
  }
}

}  // namespace
}  // namespace pipelink::test
