// Token text -> id for the tokenizers: open addressing over a power-of-two table, linear probing.
// A slot holds (high 32 bits of the hash) << 32 | (id + 1); 0 is empty. Most bigram probes of a
// merge loop miss, and the hash tag rejects them without touching the token text
// (std::unordered_map was 40% of SentencePiece encode time). The texts live with the caller.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace dspark::tokenizer {

class TokenIndex {
 public:
  // Sized for n texts at load factor <= 1/2.
  void reserve(size_t n) {
    size_t n_slots = 16;
    while (n_slots < 2 * n) n_slots *= 2;
    slots_.assign(n_slots, 0);
    mask_ = n_slots - 1;
  }
  // Id whose text is s, -1 if none.
  int32_t find(std::string_view s, const std::vector<std::string>& texts) const {
    const uint64_t h = std::hash<std::string_view>{}(s);
    const uint64_t tag = h >> 32;
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) return -1;
      if ((slot >> 32) == tag) {
        const auto id = static_cast<int32_t>((slot & 0xFFFFFFFFu) - 1);
        if (texts[id] == s) return id;
      }
    }
  }
  // Inserts texts[id]; returns the id already holding the same text (nothing inserted), or -1.
  int32_t insert(int32_t id, const std::vector<std::string>& texts) {
    const std::string_view s = texts[id];
    const uint64_t h = std::hash<std::string_view>{}(s);
    const uint64_t tag = h >> 32;
    for (uint64_t i = h & mask_;; i = (i + 1) & mask_) {
      const uint64_t slot = slots_[i];
      if (slot == 0) {
        slots_[i] = (tag << 32) | static_cast<uint64_t>(id + 1);
        return -1;
      }
      if ((slot >> 32) == tag) {
        const auto other = static_cast<int32_t>((slot & 0xFFFFFFFFu) - 1);
        if (texts[other] == s) return other;
      }
    }
  }

 private:
  std::vector<uint64_t> slots_;
  uint64_t mask_ = 0;
};

}  // namespace dspark::tokenizer
