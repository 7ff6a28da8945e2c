#include "tokenizer/pretokenize.h"

#include <utility>

#include "tokenizer/unicode_data.h"

namespace dspark::tokenizer {
namespace {

using unicode::CharClass;

// Per code point facts the scanners test (llama.cpp's unicode_cpt_flags, reduced). A position
// outside the piece being scanned has no bits at all, like llama.cpp's empty flags; every code
// point inside has kPresent (llama.cpp: even an unassigned one has its UNDEFINED bit).
constexpr uint8_t kPresent = 1u << 0;
constexpr uint8_t kLetter = 1u << 1;
constexpr uint8_t kNumber = 1u << 2;
constexpr uint8_t kSpace = 1u << 3;   // White_Space
constexpr uint8_t kPunct = 1u << 4;   // \p{P}
constexpr uint8_t kSymbol = 1u << 5;  // \p{S}

uint8_t flags_of(uint32_t cp) {
  uint8_t f = kPresent;
  switch (unicode::char_class(cp)) {
    case CharClass::kLetter: f |= kLetter; break;
    case CharClass::kNumber: f |= kNumber; break;
    case CharClass::kPunct: f |= kPunct; break;
    case CharClass::kSymbol: f |= kSymbol; break;
    case CharClass::kMark:
    case CharClass::kOther: break;
  }
  if (unicode::is_whitespace(cp)) f |= kSpace;
  return f;
}

constexpr uint32_t kOutOfRange = 0xFFFFFFFFu;

// One piece [begin, end) of the code points under a scanner, and the word lengths it emits.
class Piece {
 public:
  Piece(const std::vector<uint32_t>& cpts, const std::vector<uint8_t>& flags, size_t begin,
        size_t end, std::vector<size_t>* out)
      : cpts_(cpts), flags_(flags), begin_(begin), end_(end), emitted_(begin), out_(out) {}

  size_t begin() const { return begin_; }
  size_t end() const { return end_; }
  uint32_t cp(size_t pos) const { return pos >= begin_ && pos < end_ ? cpts_[pos] : kOutOfRange; }
  uint8_t fl(size_t pos) const { return pos >= begin_ && pos < end_ ? flags_[pos] : 0; }
  // Closes the word ending at `end` (nothing when empty).
  void emit(size_t end) {
    if (end > emitted_) out_->push_back(end - emitted_);
    emitted_ = end;
  }

 private:
  const std::vector<uint32_t>& cpts_;
  const std::vector<uint8_t>& flags_;
  size_t begin_, end_, emitted_;
  std::vector<size_t>* out_;
};

bool is_cr_or_lf(uint32_t c) { return c == '\r' || c == '\n'; }

// 's 't 're 've 'm 'll 'd at `pos` (an apostrophe with at least one code point after it in the
// piece): the length of the match, or 0. `fold` lowercases the letters first (llama3 / qwen2).
size_t contraction_length(const Piece& p, size_t pos, bool fold) {
  auto at = [&](size_t i) { return fold ? unicode::lowercase_if_ascii(p.cp(i)) : p.cp(i); };
  const uint32_t a = at(pos + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
  if (pos + 2 >= p.end()) return 0;
  const uint32_t b = at(pos + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
  return 0;
}

// Trailing-whitespace rules shared by every scanner: "\s+(?!\S)" leaves the last white space of a
// run for the next word unless the run ends the piece; "\s+" takes the rest. Returns false when
// there is no white space at pos.
bool whitespace_run(Piece& p, size_t* pos) {
  size_t n = 0;
  while (p.fl(*pos + n) & kSpace) ++n;
  if (n > 1 && p.cp(*pos + n) != kOutOfRange) {
    *pos += n - 1;
    p.emit(*pos);
    return true;
  }
  if (n > 0) {
    *pos += n;
    p.emit(*pos);
    return true;
  }
  return false;
}

// llama.cpp unicode_regex_split_custom_gpt2.
void scan_gpt2(Piece& p) {
  constexpr uint8_t kWordish = kSpace | kLetter | kNumber;
  size_t pos = p.begin();
  while (pos < p.end()) {
    const uint32_t c = p.cp(pos);
    if (c == '\'' && pos + 1 < p.end()) {
      if (const size_t n = contraction_length(p, pos, false); n > 0) {
        pos += n;
        p.emit(pos);
        continue;
      }
    }
    // The class decisions look past one leading space.
    const uint8_t f2 = c == ' ' ? p.fl(pos + 1) : p.fl(pos);
    if (f2 & (kLetter | kNumber)) {  // " ?\p{L}+" or " ?\p{N}+"
      const uint8_t cls = f2 & (kLetter | kNumber);
      pos += c == ' ';
      while (p.fl(pos) & cls) ++pos;
      p.emit(pos);
      continue;
    }
    if (!(f2 & kWordish) && f2 != 0) {  // " ?[^\s\p{L}\p{N}]+"
      pos += c == ' ';
      while (!(p.fl(pos) & kWordish) && p.fl(pos) != 0) ++pos;
      p.emit(pos);
      continue;
    }
    if (whitespace_run(p, &pos)) continue;
    p.emit(++pos);  // unreachable with llama.cpp's flags; kept as its scanner has it
  }
}

// llama.cpp unicode_regex_split_custom_llama3 (max_digits 3) and _qwen2 (max_digits 1).
void scan_llama3(Piece& p, size_t max_digits) {
  constexpr uint8_t kWordish = kSpace | kLetter | kNumber;
  size_t pos = p.begin();
  while (pos < p.end()) {
    const uint32_t c = p.cp(pos);
    const uint8_t f = p.fl(pos);
    if (c == '\'' && pos + 1 < p.end()) {
      if (const size_t n = contraction_length(p, pos, true); n > 0) {
        pos += n;
        p.emit(pos);
        continue;
      }
    }
    // "[^\r\n\p{L}\p{N}]?\p{L}+": any one code point that is no CR/LF/number, then letters.
    if (!is_cr_or_lf(c) && !(f & kNumber) && ((f & kLetter) || (p.fl(pos + 1) & kLetter))) {
      ++pos;
      while (p.fl(pos) & kLetter) ++pos;
      p.emit(pos);
      continue;
    }
    if (f & kNumber) {  // "\p{N}{1,max_digits}", repeated over the run
      size_t group = pos;
      while (p.fl(pos) & kNumber) {
        if (++pos - group >= max_digits) {
          p.emit(pos);
          group = pos;
        }
      }
      p.emit(pos);
      continue;
    }
    // " ?[^\s\p{L}\p{N}]+[\r\n]*". llama.cpp tests the presence bit of the first code point, not of
    // the one after the space, so a space that ends the piece is taken here (as a word of its own,
    // which "\s+" would give too).
    const uint8_t f2 = c == ' ' ? p.fl(pos + 1) : f;
    if (!(f2 & kWordish) && f != 0) {
      pos += c == ' ';
      while (!(p.fl(pos) & kWordish) && p.fl(pos) != 0) ++pos;
      while (is_cr_or_lf(p.cp(pos))) ++pos;
      p.emit(pos);
      continue;
    }
    // "\s*[\r\n]+": white space up to the last CR/LF of the run.
    size_t n = 0, after_last_newline = 0;
    while (p.fl(pos + n) & kSpace) {
      if (is_cr_or_lf(p.cp(pos + n))) after_last_newline = pos + n + 1;
      ++n;
    }
    if (after_last_newline > 0) {
      pos = after_last_newline;
      p.emit(pos);
      continue;
    }
    if (whitespace_run(p, &pos)) continue;
    p.emit(++pos);  // unreachable, as in llama.cpp
  }
}

// A std::regex step of llama.cpp's unicode_regex_split_stl for a single-class pattern: maximal
// runs (or single code points when !runs) of code points with `in_set` become words, and so does
// every stretch between them.
template <class InSet>
void isolate(Piece& p, bool runs, InSet in_set) {
  size_t pos = p.begin();
  while (pos < p.end()) {
    if (!in_set(p.cp(pos), p.fl(pos))) {
      ++pos;
      continue;
    }
    p.emit(pos);
    ++pos;
    while (runs && pos < p.end() && in_set(p.cp(pos), p.fl(pos))) ++pos;
    p.emit(pos);
  }
  p.emit(p.end());
}

// "[0-9][0-9][0-9]": leftmost non-overlapping triples of ASCII digits.
void isolate_digit_triples(Piece& p) {
  auto digit = [&](size_t i) { return p.cp(i) >= '0' && p.cp(i) <= '9'; };
  size_t pos = p.begin();
  while (pos < p.end()) {
    if (digit(pos) && digit(pos + 1) && digit(pos + 2)) {
      p.emit(pos);
      pos += 3;
      p.emit(pos);
    } else {
      ++pos;
    }
  }
  p.emit(p.end());
}

// \p{N} as llama.cpp's collapsed std::regex sees it: ASCII digits, and non-ASCII code points of
// category N that are not white space (none is).
bool number_cp(uint32_t, uint8_t f) { return (f & kNumber) != 0; }

// [\p{P}\$\+<=>\^~\|]: in ASCII every punctuation and symbol character but '`' (llama.cpp's ASCII
// stand-in for \p{P} lists the punctuation, the regex adds $+<=>^~|); above ASCII category P.
bool default_punct_cp(uint32_t cp, uint8_t f) {
  if (cp < 0x80) return (f & (kPunct | kSymbol)) != 0 && cp != '`';
  return (f & kPunct) != 0 && !(f & kSpace);
}

// Runs `step` over every piece of *lengths and replaces them with what it emits.
template <class Step>
void apply(const std::vector<uint32_t>& cpts, const std::vector<uint8_t>& flags,
           std::vector<size_t>* lengths, Step step) {
  std::vector<size_t> next;
  next.reserve(lengths->size() * 2);
  size_t begin = 0;
  for (size_t n : *lengths) {
    Piece p(cpts, flags, begin, begin + n, &next);
    step(p);
    begin += n;
  }
  lengths->swap(next);
}

struct NamedSpec {
  std::string_view name;
  PreTokenizerSpec spec;
};

constexpr PreTokenizerSpec kDefaultSpec{PreTokenizerKind::kDefault, false, false};
constexpr PreTokenizerSpec kGpt2Spec{PreTokenizerKind::kGpt2, false, false};
constexpr PreTokenizerSpec kSmollmSpec{PreTokenizerKind::kSmollm, false, false};
constexpr PreTokenizerSpec kLlama3Spec{PreTokenizerKind::kLlama3, true, true};
constexpr PreTokenizerSpec kLlama3RegexOnly{PreTokenizerKind::kLlama3, false, false};
constexpr PreTokenizerSpec kQwen2Spec{PreTokenizerKind::kQwen2, false, false};

// llama.cpp's tokenizer.ggml.pre names whose rules are one of the families above and that set no
// other option this tokenizer lacks (add_sep, token-strip attributes, ...).
constexpr NamedSpec kNames[] = {
    {"default", kDefaultSpec},
    {"gpt-2", kGpt2Spec}, {"gpt2", kGpt2Spec}, {"phi-2", kGpt2Spec}, {"mpt", kGpt2Spec},
    {"olmo", kGpt2Spec}, {"jais", kGpt2Spec}, {"trillion", kGpt2Spec},
    {"granite-docling", kGpt2Spec}, {"exaone4", kGpt2Spec}, {"gigachat", kGpt2Spec},
    {"a.x-4.0", kGpt2Spec}, {"mellum", kGpt2Spec}, {"jina-es", kGpt2Spec}, {"jina-de", kGpt2Spec},
    {"smollm", kSmollmSpec}, {"starcoder", kSmollmSpec}, {"refact", kSmollmSpec},
    {"command-r", kSmollmSpec}, {"codeshell", kSmollmSpec}, {"exaone", kSmollmSpec},
    {"minerva-7b", kSmollmSpec}, {"mellum2", kSmollmSpec},
    {"llama3", kLlama3Spec}, {"llama-v3", kLlama3Spec}, {"llama-bpe", kLlama3Spec},
    {"falcon3", kLlama3Spec}, {"falcon-h1", kLlama3Spec}, {"pixtral", kLlama3Spec},
    {"midm-2.0", kLlama3Spec}, {"lfm2", kLlama3Spec}, {"jina-v5-nano", kLlama3Spec},
    {"dbrx", kLlama3RegexOnly}, {"smaug-bpe", kLlama3RegexOnly},
    {"qwen2", kQwen2Spec}, {"deepseek-r1-qwen", kQwen2Spec}, {"kormo", kQwen2Spec},
    {"f2llmv2", kQwen2Spec}, {"megrez", kQwen2Spec}, {"stablelm2", kQwen2Spec},
    {"hunyuan", kQwen2Spec}, {"solar-open", kQwen2Spec},
};

}  // namespace

Result<PreTokenizerSpec> find_pre_tokenizer(std::string_view pre) {
  for (const NamedSpec& n : kNames) {
    if (n.name == pre) return n.spec;
  }
  std::string shown;
  for (char ch : pre.substr(0, 64)) {
    const auto u = static_cast<unsigned char>(ch);
    shown += (u >= 0x20 && u < 0x7F) ? ch : '?';
  }
  return Status::error("tokenizer.ggml.pre: pre-tokenizer \"" + shown +
                       "\" is not supported (see src/tokenizer/pretokenize.h for the list)");
}

void decode_utf8_lax(std::string_view s, std::vector<uint32_t>* cpts) {
  cpts->reserve(cpts->size() + s.size());
  auto cont = [&](size_t i) {
    return i < s.size() && (static_cast<unsigned char>(s[i]) & 0xC0) == 0x80;
  };
  auto byte = [&](size_t i) { return static_cast<uint32_t>(static_cast<unsigned char>(s[i])); };
  size_t i = 0;
  while (i < s.size()) {
    const uint32_t b0 = byte(i);
    uint32_t cp = 0;
    size_t len = 0;
    if (b0 < 0x80) {
      cp = b0, len = 1;
    } else if ((b0 & 0xE0) == 0xC0 && cont(i + 1)) {
      cp = ((b0 & 0x1F) << 6) | (byte(i + 1) & 0x3F), len = 2;
    } else if ((b0 & 0xF0) == 0xE0 && cont(i + 1) && cont(i + 2)) {
      cp = ((b0 & 0x0F) << 12) | ((byte(i + 1) & 0x3F) << 6) | (byte(i + 2) & 0x3F), len = 3;
    } else if ((b0 & 0xF8) == 0xF0 && cont(i + 1) && cont(i + 2) && cont(i + 3)) {
      cp = ((b0 & 0x07) << 18) | ((byte(i + 1) & 0x3F) << 12) | ((byte(i + 2) & 0x3F) << 6) |
           (byte(i + 3) & 0x3F);
      len = cp <= 0x10FFFF ? 4 : 0;
    }
    if (len == 0) {  // continuation or invalid lead, truncated sequence, or above U+10FFFF
      cpts->push_back(0xFFFD);
      ++i;
      continue;
    }
    cpts->push_back(cp);
    i += len;
  }
}

void append_utf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | ((cp >> 18) & 0x07)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

void pretokenize(PreTokenizerKind kind, const std::vector<uint32_t>& cpts,
                 std::vector<size_t>* word_lengths) {
  word_lengths->clear();
  if (cpts.empty()) return;
  std::vector<uint8_t> flags(cpts.size());
  for (size_t i = 0; i < cpts.size(); ++i) flags[i] = flags_of(cpts[i]);
  word_lengths->push_back(cpts.size());

  auto gpt2 = [](Piece& p) { scan_gpt2(p); };
  switch (kind) {
    case PreTokenizerKind::kGpt2:
      apply(cpts, flags, word_lengths, gpt2);
      break;
    case PreTokenizerKind::kSmollm:
      apply(cpts, flags, word_lengths, [](Piece& p) { isolate(p, false, number_cp); });
      apply(cpts, flags, word_lengths, gpt2);
      break;
    case PreTokenizerKind::kDefault:
      apply(cpts, flags, word_lengths, [](Piece& p) { isolate(p, true, default_punct_cp); });
      apply(cpts, flags, word_lengths, gpt2);
      apply(cpts, flags, word_lengths, [](Piece& p) { isolate(p, true, number_cp); });
      apply(cpts, flags, word_lengths, [](Piece& p) { isolate_digit_triples(p); });
      break;
    case PreTokenizerKind::kLlama3:
      apply(cpts, flags, word_lengths, [](Piece& p) { scan_llama3(p, 3); });
      break;
    case PreTokenizerKind::kQwen2:
      apply(cpts, flags, word_lengths, [](Piece& p) { scan_llama3(p, 1); });
      break;
  }
}

std::vector<std::string> pretokenize_text(PreTokenizerKind kind, std::string_view text) {
  std::vector<uint32_t> cpts;
  decode_utf8_lax(text, &cpts);
  std::vector<size_t> lengths;
  pretokenize(kind, cpts, &lengths);
  std::vector<std::string> words;
  words.reserve(lengths.size());
  size_t begin = 0;
  for (size_t n : lengths) {
    std::string& w = words.emplace_back();
    for (size_t i = begin; i < begin + n; ++i) append_utf8(cpts[i], &w);
    begin += n;
  }
  return words;
}

}  // namespace dspark::tokenizer
