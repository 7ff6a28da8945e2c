// Minimal flag parser for the dspark verbs: --name VALUE, --name=VALUE, -x VALUE, boolean --flag.
// Bad values and unknown flags are errors naming the flag (the verb exits with code 2).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "core/status.h"

namespace dspark::tools {

class Args {
 public:
  Args(std::string usage, std::string summary) : usage_(std::move(usage)), summary_(std::move(summary)) {}

  void add(const std::string& names, std::string* out, const std::string& help);   // "--model,-m"
  void add(const std::string& names, int64_t* out, const std::string& help, int64_t lo, int64_t hi);
  void add(const std::string& names, double* out, const std::string& help, double lo, double hi);
  void add_flag(const std::string& names, bool* out, const std::string& help);
  void add_list(const std::string& names, std::vector<std::string>* out, const std::string& help);
  // A flag whose value `set` validates and stores (its error is prefixed with the flag's name).
  void add_custom(const std::string& names, const std::string& help, const std::string& default_text,
                  std::function<Status(const std::string& value)> set);

  // Parses argv[first..]. Returns an error for unknown flags, missing or bad values.
  Status parse(int argc, char** argv, int first);
  bool help_requested() const { return help_; }
  // Arguments that are not flags, in order.
  const std::vector<std::string>& positional() const { return positional_; }
  std::string help() const;

 private:
  struct Opt {
    std::vector<std::string> names;
    std::string help, default_text;
    bool takes_value = true;
    std::function<Status(const std::string& name, const std::string& value)> set;
  };
  Opt& make(const std::string& names, const std::string& help);
  std::string usage_, summary_;
  std::vector<Opt> opts_;
  bool help_ = false;
  std::vector<std::string> positional_;
};

// How a verb reports an error: "dspark VERB: message" on stderr, and the exit code to return
// (kExitBadInput unless told otherwise, e.g. 1 for a run that failed on good input).
struct VerbError {
  const char* verb;  // "generate", "suffix-index build", ...
  int operator()(const std::string& message, int code = kExitBadInput) const;
};

// A library's remark (core/note.h) as one line on stderr: the NoteFn every verb passes down.
void print_note(const std::string& text);

// Parses argv[first..]: an exit code to return at once (bad flags: the error and 2; --help: the help
// on stdout and 0), or nullopt to go on.
std::optional<int> parse_verb_args(Args& args, int argc, char** argv, const VerbError& fail, int first = 2);

// "1,4,7" -> {1, 4, 7}; an error naming `flag` for anything else ("--taps: expected ...").
Result<std::vector<int>> parse_int_list(const std::string& text, const std::string& flag);

}  // namespace dspark::tools
