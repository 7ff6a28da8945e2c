// A library's remarks to whoever called it (a cache file rejected and rebuilt, a conversion made, a
// setting clamped), passed as a callback instead of printed: the verbs print them on stderr
// (tools::print_note), `ab` adds them to its events, a test collects them. Null: dropped.
#pragma once

#include <functional>
#include <string>

namespace dspark {

using NoteFn = std::function<void(const std::string&)>;

inline void notify(const NoteFn& note, const std::string& text) {
  if (note) note(text);
}

}  // namespace dspark
