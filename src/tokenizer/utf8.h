// UTF-8 helpers for token output. Token pieces are raw bytes: a character may span several BYTE
// tokens (<0xE4><0xBD><0xA0>), so text is validated only after joining, and a stream must hold
// back an incomplete trailing sequence.
//
// Validation follows Unicode 15 table 3-7 (no overlongs, no surrogates, nothing above U+10FFFF);
// each maximal invalid subpart becomes one U+FFFD (the W3C/WHATWG "maximal subpart" practice, as
// Python's errors="replace" does).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace dspark::tokenizer {

class Tokenizer;

inline constexpr std::string_view kReplacementChar = "\xEF\xBF\xBD";  // U+FFFD

// True when `s` is well-formed UTF-8.
bool is_valid_utf8(std::string_view s);
// `s` with every maximal invalid subpart (a truncated sequence included) replaced by U+FFFD.
std::string sanitize_utf8(std::string_view s);

// Streaming detokenizer: push() returns only well-formed UTF-8 and never splits a character;
// bytes that may still complete a character wait for the next push. The concatenation of every
// push() and the final flush() equals sanitize_utf8(all piece bytes).
// Not thread-safe; one per generation stream. The tokenizer must outlive it.
class StreamDecoder {
 public:
  explicit StreamDecoder(const Tokenizer& tokenizer, bool render_special = false)
      : tokenizer_(&tokenizer), render_special_(render_special) {}

  std::string push(int32_t id);                // piece of `id` via token_to_piece
  std::string push_bytes(std::string_view bytes);  // raw bytes (tests, custom pieces)
  std::string flush();                         // the held-back tail, invalid bytes as U+FFFD
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const Tokenizer* tokenizer_;
  bool render_special_;
  std::string pending_;  // an incomplete but so far valid sequence, at most 3 bytes
};

}  // namespace dspark::tokenizer
