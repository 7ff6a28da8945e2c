#include "tools/ab_arm.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace dspark::tools {

namespace {

bool is_spec_key(const std::string& k) {
  return k == "draft-kind" || k == "draft-model" || k == "num-draft-tokens" || k == "draft-threshold" ||
         k == "draft-schedule" || k == "draft-copy";
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
  if (spec == "serial") {
    arm.serial = true;
    return arm;
  }
  if (spec.empty()) return Status::error(where + "empty spec (use serial or key=value,...)");
  bool seen_kind = false, seen_model = false, seen_gamma = false, seen_threshold = false, seen_schedule = false,
       seen_copy = false;
  for (size_t from = 0; from <= spec.size();) {  // every comma-separated item, empty ones included
    size_t to = spec.find(',', from);
    if (to == std::string::npos) to = spec.size();
    const std::string item = spec.substr(from, to - from);
    from = to + 1;
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0)
      return Status::error(where + "'" + item + "' is not key=value (keys: draft-kind, draft-model, "
                           "num-draft-tokens, draft-threshold, draft-schedule, draft-copy; or the whole spec 'serial')");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    auto once = [&](bool& seen) {
      if (seen) return Status::error(where + key + " given twice");
      seen = true;
      return Status::ok();
    };
    if (key == "draft-kind") {
      DSPARK_RETURN_IF_ERROR(once(seen_kind));
      if (value != "auto" && value != "ngram" && value != "draft-model" && value != "dspark")
        return Status::error(where + "draft-kind '" + value + "' is not one of auto, ngram, draft-model, dspark");
      arm.drafter.kind = value;
    } else if (key == "draft-model") {
      DSPARK_RETURN_IF_ERROR(once(seen_model));
      if (value.empty()) return Status::error(where + "draft-model needs a path");
      arm.drafter.path = value;
    } else if (key == "num-draft-tokens") {
      DSPARK_RETURN_IF_ERROR(once(seen_gamma));
      errno = 0;
      char* end = nullptr;
      const long long g = std::strtoll(value.c_str(), &end, 10);
      if (value.empty() || *end != '\0' || errno == ERANGE || g < 0 || g > 64)
        return Status::error(where + "num-draft-tokens '" + value + "' is not an integer in [0, 64]");
      arm.drafter.gamma = (int)g;
    } else if (key == "draft-threshold") {
      DSPARK_RETURN_IF_ERROR(once(seen_threshold));
      char* end = nullptr;
      const double t = std::strtod(value.c_str(), &end);
      if (value.empty() || *end != '\0' || !std::isfinite(t) || t < 0 || t > 1)
        return Status::error(where + "draft-threshold '" + value + "' is not a number in [0, 1]");
      arm.drafter.threshold = t;
    } else if (key == "draft-schedule") {
      DSPARK_RETURN_IF_ERROR(once(seen_schedule));
      if (value != "fixed" && value != "cost")
        return Status::error(where + "draft-schedule '" + value + "' is not fixed or cost");
      arm.drafter.schedule = value == "cost";
    } else if (key == "draft-copy") {
      DSPARK_RETURN_IF_ERROR(once(seen_copy));
      if (Status st = check_draft_copy_mode(value); !st) return Status::error(where + st.message());
      arm.drafter.copy = value;
    } else {
      return Status::error(where + "unknown key '" + key + "' (draft-kind, draft-model, num-draft-tokens, "
                           "draft-threshold, draft-schedule, draft-copy)");
    }
  }
  if (arm.drafter.kind == "auto" && arm.drafter.path.empty())
    return Status::error(where + "needs draft-model=PATH or draft-kind=ngram");
  if (arm.drafter.kind == "ngram" && !arm.drafter.path.empty())
    return Status::error(where + "draft-kind=ngram takes no draft-model");
  if ((arm.drafter.kind == "draft-model" || arm.drafter.kind == "dspark") && arm.drafter.path.empty())
    return Status::error(where + "draft-kind=" + arm.drafter.kind + " needs draft-model=PATH");
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

}  // namespace dspark::tools
