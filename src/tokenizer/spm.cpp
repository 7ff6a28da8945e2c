#include "tokenizer/spm.h"

#include <algorithm>
#include <array>
#include <functional>
#include <queue>
#include <unordered_map>

#include "formats/gguf.h"
#include "tokenizer/special_split.h"
#include "tokenizer/token_index.h"

namespace dspark::tokenizer {
namespace {

// llama_token_attr bits (llama.h); a token can carry several (USER_DEFINED | CONTROL).
constexpr uint32_t kAttrUnknown = 1u << 0;
constexpr uint32_t kAttrUnused = 1u << 1;
constexpr uint32_t kAttrNormal = 1u << 2;
constexpr uint32_t kAttrControl = 1u << 3;
constexpr uint32_t kAttrUserDefined = 1u << 4;
constexpr uint32_t kAttrByte = 1u << 5;
constexpr uint32_t kAttrSpecial = kAttrUnknown | kAttrControl;  // hidden unless rendered

constexpr std::string_view kSpaceEscape = "\xE2\x96\x81";  // U+2581, SentencePiece's space
constexpr std::string_view kEndOfTurn = "<end_of_turn>";

// Token texts llama.cpp's loader forces to CONTROL whatever their stored type (end-of-turn,
// end-of-generation and fill-in-the-middle detection by text in llama_vocab::impl::load).
constexpr std::string_view kForcedControlTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|file_sep|>",
};

uint32_t attr_from_type(int32_t type) {
  switch (static_cast<TokenType>(type)) {
    case TokenType::kNormal: return kAttrNormal;
    case TokenType::kUnknown: return kAttrUnknown;
    case TokenType::kControl: return kAttrControl;
    case TokenType::kUserDefined: return kAttrUserDefined;
    case TokenType::kUnused: return kAttrUnused;
    case TokenType::kByte: return kAttrByte;
  }
  return 0;  // undefined
}

// Byte length of a UTF-8 sequence from its lead byte (llama.cpp unicode_len_utf8): continuation and
// invalid lead bytes count as 1.
inline size_t utf8_len_from_lead(unsigned char c) {
  static constexpr uint8_t kLookup[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kLookup[c >> 4];
}

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

}  // namespace

struct SpmTokenizer::Tables {
  std::vector<std::string> texts;   // [n_vocab]
  std::vector<float> scores;        // [n_vocab]
  std::vector<uint32_t> attrs;      // [n_vocab] kAttr* bits
  std::vector<int16_t> byte_value;  // [n_vocab] 0..255 for BYTE tokens, else -1
  TokenIndex index;                 // text -> id (token_index.h)
  std::array<int32_t, 256> byte_to_id{};                // -1 when the vocabulary lacks it

  // Special list in llama.cpp order, and a byte trie over their texts used to find which of them
  // occur in a text at all (partitioning then runs only for those; the result is the same).
  SpecialSplitter splitter;

  int32_t bos = -1, eos = -1, unk = -1, eot = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;

  int32_t lookup(std::string_view s) const { return index.find(s, texts); }
  void merge(std::string_view text, std::vector<int32_t>* out) const;
};

Result<SpmTokenizer> SpmTokenizer::create(Vocab vocab) {
  DSPARK_RETURN_IF_ERROR(validate_vocab(vocab));
  auto t = std::make_shared<Tables>();
  const int32_t n_vocab = vocab.n_vocab();
  t->texts = std::move(vocab.tokens);
  t->scores = std::move(vocab.scores);
  t->attrs.resize(n_vocab);
  t->byte_value.assign(n_vocab, -1);
  t->index.reserve(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    std::string& text = t->texts[id];
    if (text.empty()) text = "[EMPTY_" + std::to_string(id) + "]";
    t->attrs[id] = attr_from_type(vocab.types[id]);
  }
  for (int32_t id = 0; id < n_vocab; ++id) {
    const std::string& text = t->texts[id];
    if (const int32_t other = t->index.insert(id, t->texts); other >= 0) {
      return Status::error("tokens: entries " + std::to_string(other) + " and " +
                           std::to_string(id) + " have the same text");
    }
    if (t->attrs[id] & kAttrByte) {
      const bool shaped = text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>';
      const int hi = shaped ? hex_digit(text[3]) : -1;
      const int lo = shaped ? hex_digit(text[4]) : -1;
      if (hi < 0 || lo < 0) {
        return Status::error("tokens: byte token " + std::to_string(id) + " is not of the form <0xXX>");
      }
      t->byte_value[id] = static_cast<int16_t>(hi * 16 + lo);
    }
  }

  for (std::string_view text : kForcedControlTexts) {
    const int32_t id = t->lookup(text);
    if (id >= 0) t->attrs[id] |= kAttrControl;
  }
  // llama.cpp keeps "</s>" an ordinary token in vocabularies that also have "<|tool_response>".
  if (const int32_t s = t->lookup("</s>"); s >= 0 && t->lookup("<|tool_response>") >= 0) {
    t->attrs[s] = kAttrNormal;
  }

  static constexpr char kHex[] = "0123456789ABCDEF";
  for (int b = 0; b < 256; ++b) {
    const char name[7] = {'<', '0', 'x', kHex[b >> 4], kHex[b & 15], '>', 0};
    int32_t id = t->lookup(name);
    if (id < 0) id = t->lookup(std::string(1, static_cast<char>(b)));  // llama.cpp's fallback
    t->byte_to_id[b] = id;
  }

  std::vector<int32_t> special_ids;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (t->attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_ids.push_back(id);
  }
  t->splitter.build(t->texts, std::move(special_ids), [&](int32_t id) { return (t->attrs[id] & kAttrSpecial) != 0; });

  t->bos = vocab.bos;
  t->eos = vocab.eos;
  t->unk = vocab.unk;
  t->eot = t->lookup(kEndOfTurn);
  t->add_bos = vocab.add_bos;
  t->add_eos = vocab.add_eos;
  t->add_space_prefix = vocab.add_space_prefix;
  return SpmTokenizer(std::move(t));
}

// llm_tokenizer_spm_session::tokenize on one escaped fragment.
void SpmTokenizer::Tables::merge(std::string_view text, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t prev, next;
    uint32_t offset, n;  // bytes of `text`; n == 0 once merged into its left neighbour
  };
  struct Bigram {
    float score;
    int32_t left, right;
    uint32_t size;
  };
  struct Lower {  // top = highest score, then leftmost
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.score < r.score || (l.score == r.score && l.left > r.left);
    }
  };
  if (text.empty()) return;

  std::vector<Symbol> symbols;
  symbols.reserve(text.size());
  for (size_t offset = 0; offset < text.size();) {
    const size_t n = std::min(utf8_len_from_lead(static_cast<unsigned char>(text[offset])),
                              text.size() - offset);
    const int32_t index = static_cast<int32_t>(symbols.size());
    symbols.push_back({index - 1, offset + n == text.size() ? -1 : index + 1,
                       static_cast<uint32_t>(offset), static_cast<uint32_t>(n)});
    offset += n;
  }

  std::vector<Bigram> heap_storage;
  heap_storage.reserve(symbols.size());
  std::priority_queue<Bigram, std::vector<Bigram>, Lower> queue(Lower{}, std::move(heap_storage));
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const uint32_t size = symbols[left].n + symbols[right].n;
    const int32_t id = lookup(text.substr(symbols[left].offset, size));
    if (id < 0) return;
    queue.push({scores[id], left, right, size});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;  // stale
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    const std::string_view piece = text.substr(s.offset, s.n);
    const int32_t id = lookup(piece);
    if (id >= 0) {
      out->push_back(id);
      continue;
    }
    for (unsigned char c : piece) {  // byte fallback
      const int32_t byte_id = byte_to_id[c] >= 0 ? byte_to_id[c] : unk;
      if (byte_id >= 0) out->push_back(byte_id);
    }
  }
}

std::vector<int32_t> SpmTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  const Tables& t = *t_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && t.add_bos) out.push_back(t.bos);

  std::vector<Fragment> fragments;
  t.splitter.partition(text, parse_special, t.texts, &fragments);
  bool prev_special = true;
  std::string escaped;
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      out.push_back(f.id);
      prev_special = true;
      continue;
    }
    escaped.clear();
    if (t.add_space_prefix && prev_special) escaped += kSpaceEscape;
    for (char c : text.substr(f.offset, f.length)) {
      if (c == ' ') {
        escaped += kSpaceEscape;
      } else {
        escaped += c;
      }
    }
    t.merge(escaped, &out);
    prev_special = false;
  }

  if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string SpmTokenizer::token_to_piece(int32_t id, bool render_special) const {
  const Tables& t = *t_;
  if (id < 0 || id >= n_vocab()) return {};
  const uint32_t attr = t.attrs[id];
  if (!render_special && (attr & kAttrSpecial)) return {};
  if (attr & (kAttrSpecial | kAttrUserDefined)) return t.texts[id];
  if (attr & kAttrNormal) {
    const std::string& text = t.texts[id];
    std::string out;
    out.reserve(text.size());
    for (size_t i = 0; i < text.size();) {
      if (text.compare(i, kSpaceEscape.size(), kSpaceEscape) == 0) {
        out += ' ';
        i += kSpaceEscape.size();
      } else {
        out += text[i++];
      }
    }
    return out;
  }
  if (attr & kAttrByte) return std::string(1, static_cast<char>(t.byte_value[id]));
  return {};  // UNUSED and undefined types
}

std::string SpmTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (i == 0 && t_->add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
  }
  return out;
}

int32_t SpmTokenizer::find_token(std::string_view text) const { return t_->lookup(text); }
int32_t SpmTokenizer::n_vocab() const { return static_cast<int32_t>(t_->texts.size()); }
int32_t SpmTokenizer::bos() const { return t_->bos; }
int32_t SpmTokenizer::eos() const { return t_->eos; }
int32_t SpmTokenizer::end_of_turn() const { return t_->eot; }
bool SpmTokenizer::add_bos() const { return t_->add_bos; }

bool SpmTokenizer::is_stop(int32_t id) const {
  return id >= 0 && (id == t_->eos || id == t_->eot);
}

const std::string& SpmTokenizer::token_text(int32_t id) const {
  DSPARK_CHECK(id >= 0 && id < n_vocab());
  return t_->texts[id];
}

float SpmTokenizer::token_score(int32_t id) const {
  DSPARK_CHECK(id >= 0 && id < n_vocab());
  return t_->scores[id];
}

bool SpmTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && (t_->attrs[id] & kAttrSpecial) != 0;
}

Result<SpmTokenizer> load_spm_tokenizer(const formats::GgufFile& file) {
  Result<Vocab> vocab = load_vocab(file);
  if (!vocab) return vocab.status();
  Result<SpmTokenizer> tok = SpmTokenizer::create(std::move(*vocab));
  if (!tok) return Status::error(file.path() + ": tokenizer: " + tok.message());
  return tok;
}

}  // namespace dspark::tokenizer
