// The registry as JSON: one description shared by `pipelink ops --json` and `pipelink.ops()`.
#include <nlohmann/json.hpp>

#include <variant>

#include "pipelink/registry.hpp"

namespace pipelink {

std::string ops_json(const DeviceDesc* target) {
  auto& reg = Registry::global();
  nlohmann::json j = nlohmann::json::array();
  for (const OpDef* d : reg.ops()) {
    nlohmann::json ports = nlohmann::json::array();
    for (const auto& p : d->ports)
      ports.push_back({{"name", p.name}, {"direction", direction_name(p.direction)}, {"optional", p.optional},
                       {"shape", shape_pattern_str(p.shape)}, {"dtypes", dtypes_str(p.dtypes)},
                       {"layout", layout_name(p.layout)}, {"alignment", p.alignment},
                       {"contiguity", contiguity_name(p.contiguity)}, {"devices", device_kinds_str(p.device_kinds)},
                       {"cross_device", p.cross_device}, {"dtype_group", p.dtype_group}, {"doc", p.doc}});
    nlohmann::json attrs = nlohmann::json::array();
    // Defaults as typed JSON values: attr_str's display form reached Python as "'tanh'", quotes
    // and all, and numbers and booleans as strings (a review, session 46).
    for (const auto& a : d->attrs)
      attrs.push_back({{"name", a.name},
                       {"default", std::visit([](const auto& v) { return nlohmann::json(v); }, a.default_value)},
                       {"choices", a.choices},
                       {"doc", a.doc}});
    nlohmann::json vars = nlohmann::json::array();
    for (const Variant* v : reg.variants(d->name))
      vars.push_back({{"name", v->name}, {"backend", device_kind_name(v->backend)}, {"priority", v->priority},
                      {"requires", v->requires_.str()}, {"deterministic", v->deterministic}});
    nlohmann::json op = {{"name", d->name}, {"version", d->version}, {"doc", d->doc}, {"ports", ports},
                         {"attributes", attrs}, {"variants", vars},
                         {"exec", {{"async", d->exec.async}, {"max_streams", d->exec.max_streams},
                                   {"needs_event_sync", d->exec.needs_event_sync},
                                   {"deterministic", d->exec.deterministic},
                                   {"may_alias", d->exec.may_alias}}}};
    if (target) {
      auto c = reg.select(d->name, *target);
      op["selected"] = c.chosen ? nlohmann::json(c.chosen->name) : nlohmann::json(nullptr);
    }
    j.push_back(op);
  }
  return j.dump(2);
}

}  // namespace pipelink
