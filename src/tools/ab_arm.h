// Arms of `dspark ab`: "serial", or a drafter config written as comma-separated key=value pairs
// that mirror `dspark generate`'s drafter flags:
//   draft-kind=auto|ngram|draft-model|dspark   (default auto: detected from draft-model)
//   draft-model=PATH                           (GGUF or DSpark checkpoint dir; no commas)
//   num-draft-tokens=G                         (0..64, default 5)
//   draft-threshold=T                          (0..1, default 0)
// e.g. "draft-kind=ngram,num-draft-tokens=3". Named arms are "NAME=SPEC" (--arm).
#pragma once

#include <string>

#include "core/status.h"
#include "tools/drafter_factory.h"

namespace dspark::tools {

struct ArmSpec {
  std::string name;        // label in tables and JSON
  std::string text;        // the SPEC as given
  bool serial = false;
  DrafterOptions drafter;  // unused when serial
};

// Parses SPEC; errors name the key or value.
Result<ArmSpec> parse_arm_spec(const std::string& name, const std::string& spec);

// Parses "NAME=SPEC" (NAME: letters, digits, '-', '_', '.'; not a SPEC key), or "serial" alone.
Result<ArmSpec> parse_named_arm(const std::string& text);

}  // namespace dspark::tools
