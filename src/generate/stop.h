// Stop-string matching for streamed text. Text is released only once it can no longer be the
// start of a stop string, so a caller never emits half of a stop sequence.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dspark::generate {

class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops);

  // Appends text; returns the part that is now safe to emit. After a stop string is found,
  // stopped() is true and the returned text ends right before it.
  std::string push(std::string_view text);
  // Releases any held-back text (end of generation without a stop).
  std::string flush();
  bool stopped() const { return stopped_; }

 private:
  std::vector<std::string> stops_;
  std::string pending_;
  bool stopped_ = false;
};

}  // namespace dspark::generate
