#include "tokenizer/utf8.h"

#include "tokenizer/tokenizer.h"

namespace dspark::tokenizer {
namespace {

// Length of the well-formed sequence starting with `lead` (1..4), or 0 for a byte that cannot
// start one (continuation bytes, C0, C1, F5..FF).
int sequence_length(unsigned char lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Allowed range of the byte after `lead` (table 3-7); later continuation bytes are 80..BF.
bool second_byte_ok(unsigned char lead, unsigned char b) {
  switch (lead) {
    case 0xE0: return b >= 0xA0 && b <= 0xBF;
    case 0xED: return b >= 0x80 && b <= 0x9F;
    case 0xF0: return b >= 0x90 && b <= 0xBF;
    case 0xF4: return b >= 0x80 && b <= 0x8F;
    default: return b >= 0x80 && b <= 0xBF;
  }
}

enum class Scan { kComplete, kInvalid, kTruncated };

// Examines the sequence at s[i]. kComplete/kInvalid set *len to the bytes it covers (the character,
// or the maximal invalid subpart, at least 1); kTruncated means s ends inside a valid prefix.
Scan scan(std::string_view s, size_t i, size_t* len) {
  const auto lead = static_cast<unsigned char>(s[i]);
  const int n = sequence_length(lead);
  if (n == 0) {
    *len = 1;
    return Scan::kInvalid;
  }
  for (int k = 1; k < n; ++k) {
    if (i + k >= s.size()) return Scan::kTruncated;
    const auto b = static_cast<unsigned char>(s[i + k]);
    const bool ok = k == 1 ? second_byte_ok(lead, b) : (b >= 0x80 && b <= 0xBF);
    if (!ok) {
      *len = static_cast<size_t>(k);
      return Scan::kInvalid;
    }
  }
  *len = static_cast<size_t>(n);
  return Scan::kComplete;
}

// Appends the sanitized form of s to *out; returns where an incomplete tail starts (s.size() when
// none) unless `final`, in which case a tail becomes one U+FFFD.
size_t sanitize_into(std::string_view s, bool final, std::string* out) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    switch (scan(s, i, &len)) {
      case Scan::kComplete:
        out->append(s.substr(i, len));
        i += len;
        break;
      case Scan::kInvalid:
        out->append(kReplacementChar);
        i += len;
        break;
      case Scan::kTruncated:
        if (!final) return i;
        out->append(kReplacementChar);
        return s.size();
    }
  }
  return s.size();
}

}  // namespace

bool is_valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    size_t len = 0;
    if (scan(s, i, &len) != Scan::kComplete) return false;
    i += len;
  }
  return true;
}

std::string sanitize_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  sanitize_into(s, /*final=*/true, &out);
  return out;
}

std::string StreamDecoder::push(int32_t id) {
  return push_bytes(tokenizer_->token_to_piece(id, render_special_));
}

std::string StreamDecoder::push_bytes(std::string_view bytes) {
  if (bytes.empty()) return {};
  pending_.append(bytes);
  std::string out;
  const size_t tail = sanitize_into(pending_, /*final=*/false, &out);
  pending_.erase(0, tail);
  return out;
}

std::string StreamDecoder::flush() {
  std::string out;
  sanitize_into(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace dspark::tokenizer
