// Arms of `dspark ab`: "serial", or a speculative::SpecConfig written as comma-separated key=value pairs
// whose keys are the verbs' drafter flags without "--" (speculative::spec_keys(): draft-kind, draft-model,
// num-draft-tokens, draft-threshold, draft-schedule, draft-copy, draft-quant), parsed by
// speculative::parse_spec, e.g. "draft-kind=ngram,num-draft-tokens=3". Named arms are "NAME=SPEC" (--arm).
// Either may end with ",lm-head=full" ("serial,lm-head=full"): the arm computes every logit at T 0
// instead of using the exact greedy head, to measure that head (same tokens).
#pragma once

#include <string>

#include "core/status.h"
#include "runtime/drafter_factory.h"

namespace dspark::eval {

struct ArmSpec {
  std::string name;        // label in tables and JSON
  std::string text;        // the SPEC as given
  bool serial = false;
  speculative::SpecConfig drafter;  // unused when serial
  bool full_lm_head = false;  // "lm-head=full": every logit computed at T 0 (GenerateParams::full_lm_head)
};

// Parses SPEC; errors name the key or value.
Result<ArmSpec> parse_arm_spec(const std::string& name, const std::string& spec);

// Parses "NAME=SPEC" (NAME: letters, digits, '-', '_', '.'; not a SPEC key), or "serial" alone.
Result<ArmSpec> parse_named_arm(const std::string& text);

}  // namespace dspark::eval
