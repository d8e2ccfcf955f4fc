#include "pipelink/contract.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <stdexcept>

namespace pipelink {

std::string Dim::str() const {
  switch (kind) {
    case Kind::fixed: return std::to_string(size);
    case Kind::any: return "-1";
    case Kind::symbol: return symbol;
  }
  return "?";
}

std::vector<Dim> parse_shape_pattern(std::string_view text) {
  auto fail = [&] { throw std::invalid_argument("bad shape pattern '" + std::string(text) + "'"); };
  auto trim = [](std::string_view s) {
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
    while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
    return s;
  };
  auto body = trim(text);
  if (body.size() < 2 || body.front() != '[' || body.back() != ']') fail();
  body = trim(body.substr(1, body.size() - 2));
  std::vector<Dim> dims;
  if (body.empty()) return dims;
  while (true) {
    auto comma = body.find(',');
    auto tok = trim(body.substr(0, comma));
    if (tok.empty()) fail();
    if (std::isalpha(static_cast<unsigned char>(tok.front())) || tok.front() == '_') {
      // An identifier: "[N F]" was one symbol named "N F", and "[N-1, F]" a symbol "N-1" (a
      // review, session 46).
      if (!std::all_of(tok.begin(), tok.end(),
                       [](char c) { return std::isalnum(static_cast<unsigned char>(c)) || c == '_'; }))
        fail();
      dims.push_back(Dim::sym(std::string(tok)));
    } else {
      std::int64_t n = 0;
      auto [p, ec] = std::from_chars(tok.data(), tok.data() + tok.size(), n);
      if (ec != std::errc() || p != tok.data() + tok.size() || n < -1) fail();
      dims.push_back(n == -1 ? Dim::any() : Dim::of(n));
    }
    if (comma == std::string_view::npos) break;
    body = body.substr(comma + 1);
  }
  return dims;
}

std::string shape_pattern_str(const std::vector<Dim>& dims) {
  std::string s = "[";
  for (std::size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + dims[i].str();
  return s + "]";
}

std::string_view direction_name(PortDirection d) noexcept {
  return d == PortDirection::in ? "in" : d == PortDirection::out ? "out" : "inout";
}
std::string dtypes_str(const std::vector<DType>& ts) {
  std::string s;
  for (auto t : ts) s += (s.empty() ? "" : "|") + std::string(dtype_name(t));
  return s;
}
std::string device_kinds_str(std::uint32_t mask) {
  std::string s;
  for (auto k : {DeviceKind::cpu, DeviceKind::cuda})
    if (mask & device_bit(k)) s += (s.empty() ? "" : "|") + std::string(device_kind_name(k));
  return s;
}

std::string_view contiguity_name(Contiguity c) noexcept {
  switch (c) {
    case Contiguity::any: return "any";
    case Contiguity::rows: return "rows";
    case Contiguity::contiguous: return "contiguous";
  }
  return "?";
}

std::string attr_str(const AttrValue& v) {
  return std::visit(
      [](const auto& x) -> std::string {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, bool>) return x ? "true" : "false";
        else if constexpr (std::is_same_v<T, std::string>) return "'" + x + "'";
        else return fmt::format("{}", x);
      },
      v);
}

namespace {

std::string_view attr_kind(const AttrValue& v) {
  static constexpr std::string_view names[] = {"bool", "int", "float", "string"};
  return names[v.index()];
}

}  // namespace

CheckResult check_contract(const std::string& op, const std::vector<PortContract>& ports,
                           const std::vector<AttrSpec>& attr_specs, const ExecContract& exec,
                           const PortMap& views, const Attrs& attrs) {
  CheckResult result;
  auto violation = [&](const PortContract& p, const char* f, std::string expected, std::string actual,
                       const TensorView* v) {
    return ContractViolationError(op, p.name, f, std::move(expected), std::move(actual),
                                  v ? v->origin() : SourceSite{});
  };

  // Unknown port names are a caller bug worth naming.
  for (const auto& [name, v] : views) {
    if (std::none_of(ports.begin(), ports.end(), [&](const PortContract& p) { return p.name == name; })) {
      std::string known;
      for (const auto& p : ports) known += (known.empty() ? "" : "|") + p.name;
      throw ContractViolationError(op, name, field::presence, "one of " + known, "unknown port '" + name + "'",
                                   v.origin());
    }
  }

  std::map<std::string, std::pair<DType, std::string>, std::less<>> group_dtype;  // group -> (dtype, port)
  std::map<std::string, std::string, std::less<>> symbol_port;                    // symbol -> port that bound it
  bool have_device = false;

  for (const auto& p : ports) {
    auto it = views.find(p.name);
    if (it == views.end()) {
      if (p.optional) continue;
      throw violation(p, field::presence, "a tensor", "nothing (required port missing)", nullptr);
    }
    const TensorView& v = it->second;
    // data: a view of elements must point at them. A null x passed every field below (address 0
    // is aligned to anything) and the kernel crashed (a review, session 46).
    // A default-constructed view is rank 0 (one element) at a null address: named as likely that,
    // not as "1 elements" (a probe, session 53).
    if (v.numel() > 0 && v.data() == nullptr)
      throw violation(p, field::presence, "a tensor with data",
                      v.rank() == 0 ? std::string("a rank-0 view at a null address (default-constructed?)")
                                    : fmt::format("{} elements at a null address", v.numel()),
                      &v);

    // rank
    if (v.rank() != int(p.shape.size()))
      throw violation(p, field::rank, std::to_string(p.shape.size()), std::to_string(v.rank()), &v);
    // shape pattern, symbols bound across ports
    for (std::size_t d = 0; d < p.shape.size(); ++d) {
      const Dim& dim = p.shape[d];
      const auto n = v.dim(int(d));
      if (dim.kind == Dim::Kind::fixed && n != dim.size)
        throw violation(p, field::shape, fmt::format("{} (dim {} = {})", shape_pattern_str(p.shape), d, dim.size),
                        v.shape_str(), &v);
      if (dim.kind == Dim::Kind::symbol) {
        auto [b, inserted] = result.dims.emplace(dim.symbol, n);
        if (inserted) {
          symbol_port[dim.symbol] = p.name;
        } else if (b->second != n) {
          throw violation(p, field::shape,
                          fmt::format("{} with {} = {} (bound by port '{}')", shape_pattern_str(p.shape),
                                      dim.symbol, b->second, symbol_port[dim.symbol]),
                          fmt::format("{} ({} = {})", v.shape_str(), dim.symbol, n), &v);
        }
      }
    }
    // dtype, and agreement within a dtype group
    if (std::find(p.dtypes.begin(), p.dtypes.end(), v.dtype()) == p.dtypes.end())
      throw violation(p, field::dtype, dtypes_str(p.dtypes), std::string(dtype_name(v.dtype())), &v);
    if (!p.dtype_group.empty()) {
      auto [g, inserted] = group_dtype.emplace(p.dtype_group, std::make_pair(v.dtype(), p.name));
      if (!inserted && g->second.first != v.dtype())
        throw violation(p, field::dtype,
                        fmt::format("{} (same as port '{}')", dtype_name(g->second.first), g->second.second),
                        std::string(dtype_name(v.dtype())), &v);
    }
    // layout: an untagged view matches any layout
    if (p.layout != Layout::unspecified && v.layout() != Layout::unspecified && v.layout() != p.layout)
      throw violation(p, field::layout, std::string(layout_name(p.layout)), std::string(layout_name(v.layout())), &v);
    // alignment
    const std::size_t need = p.alignment ? p.alignment : v.itemsize();
    if (v.numel() > 0 && v.alignment() < need)
      throw violation(p, field::alignment, fmt::format("{}-byte aligned", need),
                      fmt::format("{}-byte aligned (address {})", v.alignment(), v.data()), &v);
    // contiguity
    if (p.contiguity == Contiguity::contiguous && !v.is_contiguous())
      throw violation(p, field::contiguity, "contiguous", "strided " + [&] {
        std::string s = "[";
        for (int d = 0; d < v.rank(); ++d) s += (d ? ", " : "") + std::to_string(v.stride(d));
        return s + "]";
      }(), &v);
    if (p.contiguity == Contiguity::rows && !v.rows_contiguous())
      throw violation(p, field::contiguity, "rows with unit inner stride",
                      fmt::format("inner stride {}", v.stride(-1)), &v);
    // device kind
    if (!(p.device_kinds & device_bit(v.device().kind)))
      throw violation(p, field::device, device_kinds_str(p.device_kinds), v.device().str(), &v);
    // one execution device unless the port allows another
    if (!p.cross_device) {
      if (!have_device) {
        result.device = v.device();
        have_device = true;
      } else if (!(result.device == v.device())) {
        throw violation(p, field::cross_device, "same device as the other ports (" + result.device.str() + ")",
                        v.device().str(), &v);
      }
    }
  }

  // aliasing: an output may overlap another port only where the op allows in-place, and never
  // itself (rows written in parallel would race)
  for (const auto& p : ports) {
    if (p.direction == PortDirection::in) continue;
    auto out = views.find(p.name);
    if (out == views.end()) continue;
    if (out->second.self_overlaps())
      throw violation(p, field::alias, "distinct memory for every element",
                      "a view whose elements overlap (strides " + [&] {
                        std::string st;
                        for (int d = 0; d < out->second.rank(); ++d) st += (d ? ", " : "") + std::to_string(out->second.stride(d));
                        return st;
                      }() + ")", &out->second);
    for (const auto& q : ports) {
      if (&q == &p) continue;
      auto other = views.find(q.name);
      if (other == views.end() || !out->second.overlaps(other->second)) continue;
      bool allowed = std::any_of(exec.may_alias.begin(), exec.may_alias.end(), [&](const auto& pr) {
        return (pr.first == q.name && pr.second == p.name) || (pr.first == p.name && pr.second == q.name);
      });
      // In-place means the very same elements; a shifted overlap would race in a parallel kernel.
      const TensorView &a = out->second, &b = other->second;
      const bool same_elements = a.data() == b.data() && a.dtype() == b.dtype() &&
                                 std::equal(a.shape().begin(), a.shape().end(), b.shape().begin(), b.shape().end()) &&
                                 std::equal(a.strides().begin(), a.strides().end(), b.strides().begin(), b.strides().end());
      if (!allowed)
        throw violation(p, field::alias, fmt::format("no overlap with port '{}'", q.name),
                        fmt::format("overlaps port '{}'", q.name), &out->second);
      if (!same_elements)
        throw violation(p, field::alias, fmt::format("exactly the elements of port '{}' (in-place) or no overlap", q.name),
                        fmt::format("partial overlap with port '{}'", q.name), &out->second);
    }
  }

  // attributes: known names, right kinds, allowed choices; defaults filled in
  for (const auto& [name, value] : attrs) {
    auto spec = std::find_if(attr_specs.begin(), attr_specs.end(), [&](const AttrSpec& a) { return a.name == name; });
    if (spec == attr_specs.end()) {
      std::string known;
      for (const auto& a : attr_specs) known += (known.empty() ? "" : "|") + a.name;
      throw ContractViolationError(op, name, field::attribute, known.empty() ? "no attributes" : "one of " + known,
                                   "unknown attribute '" + name + "'");
    }
    if (value.index() != spec->default_value.index())
      throw ContractViolationError(op, name, field::attribute, std::string(attr_kind(spec->default_value)),
                                   fmt::format("{} {}", attr_kind(value), attr_str(value)));
    if (!spec->choices.empty()) {
      const auto& s = std::get<std::string>(value);
      if (std::find(spec->choices.begin(), spec->choices.end(), s) == spec->choices.end()) {
        std::string allowed;
        for (const auto& c : spec->choices) allowed += (allowed.empty() ? "" : "|") + c;
        throw ContractViolationError(op, name, field::attribute, "one of " + allowed, "'" + s + "'");
      }
    }
  }
  for (const auto& spec : attr_specs) {
    auto it = attrs.find(spec.name);
    result.attrs[spec.name] = it == attrs.end() ? spec.default_value : it->second;
  }
  return result;
}

}  // namespace pipelink
