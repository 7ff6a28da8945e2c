#include "eval/ab_arm.h"

#include <cctype>
#include <string_view>

#include "generate/lm_head.h"

namespace dspark::eval {

using namespace dspark::runtime;  // registry, loaded model, drafter factory

namespace {

bool is_spec_key(const std::string& k) {
  for (const speculative::SpecKey& key : speculative::spec_keys())
    if (k == key.name) return true;
  return false;
}

bool valid_name(const std::string& s) {
  if (s.empty() || s.size() > 64) return false;
  for (char c : s)
    if (!(std::isalnum((unsigned char)c) || c == '-' || c == '_' || c == '.')) return false;
  return true;
}

}  // namespace

Result<ArmSpec> parse_arm_spec(const std::string& name, const std::string& spec) {
  ArmSpec arm;
  arm.name = name;
  arm.text = spec;
  const std::string where = "arm " + name + ": ";
  // "lm-head=" must be the last key; its value goes through the one LM-head parser.
  std::string rest = spec;
  const size_t key = rest.rfind("lm-head=");
  if (key != std::string::npos && (key == 0 || rest[key - 1] == ',') && rest.find(',', key) == std::string::npos) {
    auto head = parse_lm_head(std::string_view(rest).substr(key + 8), /*allow_both=*/false);
    if (!head) return Status::error(where + head.message());
    arm.full_lm_head = *head == LmHead::kFull;
    if (key == 0) return Status::error(where + "lm-head (argmax or full) goes last, after the arm, e.g. 'serial,lm-head=full'");
    rest.resize(key - 1);
  }
  if (rest.find("lm-head") != std::string::npos)
    return Status::error(where + "lm-head (argmax or full) goes last, after the arm, e.g. 'serial,lm-head=full'");
  if (rest == "serial") {
    arm.serial = true;
    return arm;
  }
  // The verbs' flag keys (speculative::spec_keys), the same parser and checks as --draft-* flags.
  // An A/B measures the checkpoint it is pointed at: draft-quant defaults to none here.
  speculative::SpecConfig base;
  base.quant = speculative::DraftQuant::kNone;
  auto c = speculative::parse_spec(rest, base);
  if (!c) return Status::error(where + c.message() + " (or the whole spec 'serial')");
  if (Status st = check_drafter_kind(c->kind); !st) return Status::error(where + st.message());
  if (Status st = speculative::check_spec(*c); !st) return Status::error(where + st.message());
  arm.drafter = *c;
  return arm;
}

Result<ArmSpec> parse_named_arm(const std::string& text) {
  if (text == "serial") return parse_arm_spec("serial", text);
  const size_t eq = text.find('=');
  const std::string name = eq == std::string::npos ? text : text.substr(0, eq);
  if (eq == std::string::npos || is_spec_key(name))
    return Status::error("--arm '" + text + "': expected NAME=SPEC, e.g. --arm ng3=draft-kind=ngram,num-draft-tokens=3");
  if (!valid_name(name))
    return Status::error("--arm '" + text + "': the name must be 1-64 letters, digits, '-', '_' or '.'");
  return parse_arm_spec(name, text.substr(eq + 1));
}

}  // namespace dspark::eval
