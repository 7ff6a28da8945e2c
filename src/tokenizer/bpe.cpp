#include "tokenizer/bpe.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <functional>
#include <queue>
#include <unordered_map>

#include "formats/gguf.h"
#include "tokenizer/special_split.h"
#include "tokenizer/token_index.h"
#include "tokenizer/pretokenize.h"

namespace dspark::tokenizer {
namespace {

// llama_token_attr bits (llama.h); a token can carry several.
constexpr uint32_t kAttrUnknown = 1u << 0;
constexpr uint32_t kAttrUnused = 1u << 1;
constexpr uint32_t kAttrNormal = 1u << 2;
constexpr uint32_t kAttrControl = 1u << 3;
constexpr uint32_t kAttrUserDefined = 1u << 4;
constexpr uint32_t kAttrByte = 1u << 5;
constexpr uint32_t kAttrSpecial = kAttrUnknown | kAttrControl;  // hidden unless rendered

// Texts llama.cpp's loader recognises (llama_vocab::impl::load). End of generation: these are
// forced to CONTROL and end generation.
constexpr std::string_view kEogTexts[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>", "[e~[",
};
// Fill-in-the-middle pad / repository / file separator: forced to CONTROL and end generation.
constexpr std::string_view kFimEogTexts[] = {
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>",
    "<|file_sep|>",
};
// Fill-in-the-middle prefix / suffix / middle: forced to CONTROL only.
constexpr std::string_view kFimTexts[] = {
    "<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "begin\xEF\xBD\x9C>",
    "<PRE>", "\xE2\x96\x81<PRE>", "<|code_prefix|>", "<|prefix|>",
    "<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81hole\xEF\xBD\x9C>",
    "<SUF>", "\xE2\x96\x81<SUF>", "<|code_suffix|>", "<|suffix|>",
    "<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<\xEF\xBD\x9C" "fim\xE2\x96\x81" "end\xEF\xBD\x9C>",
    "<MID>", "\xE2\x96\x81<MID>", "<|code_middle|>", "<|middle|>",
};
// gpt-oss: always rendered (USER_DEFINED whatever the file says).
constexpr std::string_view kUserDefinedTexts[] = {"<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"};
// end_of_turn(): the first of these present.
constexpr std::string_view kEndOfTurnTexts[] = {"<|im_end|>", "<|eot_id|>", "<end_of_turn>"};

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

int hex_digit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// `s` for an error message: printable ASCII as is, other bytes as \xNN, at most 48 bytes.
std::string quoted(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out = "\"";
  for (size_t i = 0; i < s.size() && i < 48; ++i) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c >= 0x20 && c < 0x7F && c != '"' && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += "\\x";
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  if (s.size() > 48) out += "...";
  return out + "\"";
}

// The GPT-2 byte alphabet (llama.cpp unicode_byte_to_utf8_map): bytes 0x21-0x7E, 0xA1-0xAC and
// 0xAE-0xFF stand for themselves; the other 68 take U+0100, U+0101, ... in byte order.
std::array<uint32_t, 256> byte_alphabet() {
  std::array<uint32_t, 256> cp{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    cp[b] = printable ? b : next++;
  }
  return cp;
}
constexpr uint32_t kAlphabetEnd = 256 + 68;  // code points of the alphabet are < this

struct Merge {
  int32_t rank;
  int32_t result;  // id of left + right, -1 when that text is no token
};

}  // namespace

struct BpeTokenizer::Tables {
  std::vector<std::string> texts;   // [n_vocab]
  std::vector<float> scores;        // [n_vocab]
  std::vector<uint32_t> attrs;      // [n_vocab] kAttr* bits
  std::vector<std::string> pieces;  // [n_vocab] token_to_piece with render_special
  std::vector<uint8_t> eog;         // [n_vocab] 1: ends generation
  TokenIndex index;                 // text -> id (token_index.h)
  // (left id << 32 | right id) -> merge. Merge halves are tokens (checked), so symbols that are no
  // token never merge, exactly as llama.cpp's lookup by text finds nothing for them.
  std::unordered_map<uint64_t, Merge> merges;

  std::array<std::string, 256> byte_text;  // UTF-8 of each byte's alphabet character
  std::array<int16_t, kAlphabetEnd> alphabet_byte;  // alphabet code point -> byte, -1 elsewhere
  std::array<int32_t, 256> byte_symbol{};  // id of byte_text[b], -1 when absent
  std::array<int32_t, 256> single_byte{};  // id of the one-byte text b (llama.cpp's fallback)

  // Special list in llama.cpp order, and a byte trie over their texts (partition runs only for
  // those that occur; the result is the same).
  SpecialSplitter splitter;

  PreTokenizerSpec pre;
  int32_t bos = -1, eos = -1, eot = -1;
  bool add_bos = false, add_eos = false, add_space_prefix = false;

  int32_t lookup(std::string_view s) const { return index.find(s, texts); }
  const Merge* find_merge(int32_t left, int32_t right) const {
    if (left < 0 || right < 0) return nullptr;
    auto it = merges.find((static_cast<uint64_t>(left) << 32) | static_cast<uint32_t>(right));
    return it == merges.end() ? nullptr : &it->second;
  }
  std::string render_piece(int32_t id) const;
  void encode_raw(std::string_view text, std::vector<int32_t>* out) const;
  void merge_word(std::string_view word, std::vector<int32_t>* out) const;
};

// token_to_piece with special = true (llama.cpp's BPE branch).
std::string BpeTokenizer::Tables::render_piece(int32_t id) const {
  const uint32_t attr = attrs[id];
  const std::string& text = texts[id];
  if (attr & (kAttrSpecial | kAttrUserDefined)) return text;
  if (attr & kAttrNormal) {
    std::vector<uint32_t> cpts;
    decode_utf8_lax(text, &cpts);
    std::string out;
    out.reserve(text.size());
    for (uint32_t cp : cpts) {
      if (cp < kAlphabetEnd && alphabet_byte[cp] >= 0) {
        out += static_cast<char>(alphabet_byte[cp]);
        continue;
      }
      // llama_decode_text: the character's UTF-8 in hex, then the whole token text.
      static constexpr char kHex[] = "0123456789abcdef";
      std::string utf8;
      append_utf8(cp, &utf8);
      out += "[UNK_BYTE_0x";
      for (unsigned char c : utf8) {
        out += kHex[c >> 4];
        out += kHex[c & 15];
      }
      out += text;
      out += "]";
    }
    return out;
  }
  if (attr & kAttrByte) {  // <0xXX>, checked by create()
    return std::string(1, static_cast<char>(hex_digit(text[3]) * 16 + hex_digit(text[4])));
  }
  return {};  // UNUSED and undefined types
}

Result<BpeTokenizer> BpeTokenizer::create(Vocab vocab) {
  DSPARK_RETURN_IF_ERROR(validate_vocab(vocab));
  if (vocab.model != "gpt2") {
    return Status::error("model: tokenizer model " + quoted(vocab.model) +
                         " is not byte-level BPE (\"gpt2\")");
  }
  Result<PreTokenizerSpec> pre = find_pre_tokenizer(vocab.pre);
  if (!pre) return pre.status();

  auto t = std::make_shared<Tables>();
  const int32_t n_vocab = vocab.n_vocab();
  t->pre = *pre;
  t->texts = std::move(vocab.tokens);
  t->scores = std::move(vocab.scores);
  t->attrs.resize(n_vocab);
  t->index.reserve(static_cast<size_t>(n_vocab));
  for (int32_t id = 0; id < n_vocab; ++id) {
    std::string& text = t->texts[id];
    if (text.empty()) text = "[EMPTY_" + std::to_string(id) + "]";
    t->attrs[id] = attr_from_type(vocab.types[id]);
    if (const int32_t other = t->index.insert(id, t->texts); other >= 0) {
      return Status::error("tokens: entries " + std::to_string(other) + " and " + std::to_string(id) +
                           " have the same text");
    }
    if (t->attrs[id] & kAttrByte) {
      const bool shaped = text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
                          hex_digit(text[3]) >= 0 && hex_digit(text[4]) >= 0;
      if (!shaped) {
        return Status::error("tokens: byte token " + std::to_string(id) + " is not of the form <0xXX>");
      }
    }
  }

  // Attributes and end-of-generation set in llama.cpp's order.
  t->eog.assign(n_vocab, 0);
  auto force_control = [&](std::string_view text, bool ends) {
    const int32_t id = t->lookup(text);
    if (id < 0) return;
    t->attrs[id] |= kAttrControl;
    if (ends) t->eog[id] = 1;
  };
  for (std::string_view s : kFimTexts) force_control(s, false);
  for (std::string_view s : kFimEogTexts) force_control(s, true);
  for (std::string_view s : kEogTexts) force_control(s, true);
  for (std::string_view s : kUserDefinedTexts) {
    if (const int32_t id = t->lookup(s); id >= 0) t->attrs[id] = kAttrUserDefined;
  }
  if (vocab.eos >= 0) t->eog[vocab.eos] = 1;
  auto in_eog = [&](std::string_view s) {
    const int32_t id = t->lookup(s);
    return id >= 0 && t->eog[id];
  };
  // o200k_harmony / solar-open: "<|end|>" is a plain rendered token there.
  const bool has_call = in_eog("<|call|>") || in_eog("<|calls|>");
  if (in_eog("<|end|>") && has_call && (in_eog("<|return|>") || in_eog("<|flush|>"))) {
    const int32_t end = t->lookup("<|end|>");
    t->eog[end] = 0;
    t->attrs[end] = kAttrUserDefined;
  }
  // Gemma 4 / PLaMo: "</s>" is a normal token next to these markers.
  if (in_eog("</s>") && (in_eog("<|tool_response>") || in_eog("<|plamo:eos|>"))) {
    const int32_t s = t->lookup("</s>");
    t->eog[s] = 0;
    t->attrs[s] = kAttrNormal;
  }

  const std::array<uint32_t, 256> alphabet = byte_alphabet();
  t->alphabet_byte.fill(-1);
  for (int b = 0; b < 256; ++b) {
    t->alphabet_byte[alphabet[b]] = static_cast<int16_t>(b);
    t->byte_text[b].clear();
    append_utf8(alphabet[b], &t->byte_text[b]);
    t->byte_symbol[b] = t->lookup(t->byte_text[b]);
    t->single_byte[b] = t->lookup(std::string(1, static_cast<char>(b)));
  }

  t->merges.reserve(vocab.merges.size());
  for (size_t i = 0; i < vocab.merges.size(); ++i) {
    const std::string& m = vocab.merges[i];
    const size_t space = m.find(' ', 1);  // llama.cpp splits at the first space after byte 0
    if (space == std::string::npos) {
      return Status::error("merges: entry " + std::to_string(i) + " " + quoted(m) +
                           " is not \"left right\" (tokenizer.ggml.merges)");
    }
    const std::string_view left = std::string_view(m).substr(0, space);
    const std::string_view right = std::string_view(m).substr(space + 1);
    const int32_t l = t->lookup(left);
    const int32_t r = t->lookup(right);
    if (l < 0 || r < 0) {
      return Status::error("merges: entry " + std::to_string(i) + " " + quoted(m) + " names " +
                           quoted(l < 0 ? left : right) + ", which is no token (tokenizer.ggml.merges)");
    }
    const std::string joined = std::string(left) + std::string(right);
    const Merge merge{static_cast<int32_t>(std::min<size_t>(i, INT32_MAX)), t->lookup(joined)};
    t->merges.emplace((static_cast<uint64_t>(l) << 32) | static_cast<uint32_t>(r), merge);  // first wins
  }

  t->pieces.resize(n_vocab);
  for (int32_t id = 0; id < n_vocab; ++id) t->pieces[id] = t->render_piece(id);

  std::vector<int32_t> special_ids;
  for (int32_t id = 0; id < n_vocab; ++id) {
    if (t->attrs[id] & (kAttrControl | kAttrUserDefined | kAttrUnknown)) special_ids.push_back(id);
  }
  t->splitter.build(t->texts, std::move(special_ids), [&](int32_t id) { return (t->attrs[id] & kAttrSpecial) != 0; });

  t->bos = vocab.bos;
  t->eos = vocab.eos;
  for (std::string_view s : kEndOfTurnTexts) {
    if ((t->eot = t->lookup(s)) >= 0) break;
  }
  t->add_bos = vocab.add_bos;
  t->add_eos = vocab.add_eos;
  t->add_space_prefix = vocab.add_space_prefix;
  return BpeTokenizer(std::move(t));
}

// One raw fragment: pre-tokenize, map each word to the byte alphabet, merge.
void BpeTokenizer::Tables::encode_raw(std::string_view text, std::vector<int32_t>* out) const {
  std::vector<uint32_t> cpts;
  decode_utf8_lax(text, &cpts);
  std::vector<size_t> lengths;
  pretokenize(pre.kind, cpts, &lengths);
  std::string word;
  size_t begin = 0;
  for (size_t n : lengths) {
    word.clear();
    for (size_t i = begin; i < begin + n; ++i) append_utf8(cpts[i], &word);
    begin += n;
    merge_word(word, out);
  }
}

// llm_tokenizer_bpe_session::tokenize on one word (raw UTF-8 bytes).
void BpeTokenizer::Tables::merge_word(std::string_view word, std::vector<int32_t>* out) const {
  struct Symbol {
    int32_t prev, next;
    uint32_t offset, n;  // bytes of the alphabet text; n == 0 once merged into its left neighbour
    int32_t id;          // token of the symbol's text, -1 if none
  };
  struct Bigram {
    int32_t rank;
    int32_t left, right;
    uint32_t size;
  };
  struct Lower {  // top = lowest rank, then leftmost
    bool operator()(const Bigram& l, const Bigram& r) const {
      return l.rank > r.rank || (l.rank == r.rank && l.left > r.left);
    }
  };
  if (word.empty()) return;

  std::string enc;  // the word in the byte alphabet
  enc.reserve(word.size() * 2);
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  for (size_t i = 0; i < word.size(); ++i) {
    const auto b = static_cast<unsigned char>(word[i]);
    const int32_t index = static_cast<int32_t>(i);
    symbols.push_back({index - 1, i + 1 == word.size() ? -1 : index + 1,
                       static_cast<uint32_t>(enc.size()), static_cast<uint32_t>(byte_text[b].size()),
                       byte_symbol[b]});
    enc += byte_text[b];
  }
  if (pre.ignore_merges) {
    if (const int32_t id = lookup(enc); id >= 0) {
      out->push_back(id);
      return;
    }
  }

  std::vector<Bigram> heap_storage;
  heap_storage.reserve(symbols.size());
  std::priority_queue<Bigram, std::vector<Bigram>, Lower> queue(Lower{}, std::move(heap_storage));
  auto try_add = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const Merge* m = find_merge(symbols[left].id, symbols[right].id);
    if (m == nullptr) return;
    queue.push({m->rank, left, right, symbols[left].n + symbols[right].n});
  };
  for (int32_t i = 1; i < static_cast<int32_t>(symbols.size()); ++i) try_add(i - 1, i);

  while (!queue.empty()) {
    const Bigram bigram = queue.top();
    queue.pop();
    Symbol& left = symbols[bigram.left];
    Symbol& right = symbols[bigram.right];
    // Stale: either side merged away or grown since (llama.cpp compares the texts; the lengths
    // decide the same, as a symbol only grows by absorbing its right neighbour).
    if (left.n == 0 || right.n == 0 || left.n + right.n != bigram.size) continue;
    left.id = find_merge(left.id, right.id)->result;
    left.n += right.n;
    right.n = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[right.next].prev = bigram.left;
    try_add(left.prev, bigram.left);
    try_add(bigram.left, left.next);
  }

  for (int32_t i = 0; i != -1; i = symbols[i].next) {
    const Symbol& s = symbols[i];
    if (s.id >= 0) {
      out->push_back(s.id);
      continue;
    }
    for (size_t k = s.offset; k < s.offset + s.n; ++k) {  // bytes of the alphabet text
      const int32_t id = single_byte[static_cast<unsigned char>(enc[k])];
      if (id >= 0) out->push_back(id);
    }
  }
}

std::vector<int32_t> BpeTokenizer::encode(std::string_view text, bool add_special,
                                          bool parse_special) const {
  const Tables& t = *t_;
  std::vector<int32_t> out;
  out.reserve(text.size() / 3 + 4);
  if (add_special && t.add_bos) out.push_back(t.bos);
  std::vector<Fragment> fragments;
  t.splitter.partition(text, parse_special, t.texts, &fragments);
  for (const Fragment& f : fragments) {
    if (f.id >= 0) {
      out.push_back(f.id);
    } else {
      t.encode_raw(text.substr(f.offset, f.length), &out);
    }
  }
  if (add_special && t.add_eos) out.push_back(t.eos);
  return out;
}

std::string BpeTokenizer::token_to_piece(int32_t id, bool render_special) const {
  if (id < 0 || id >= n_vocab()) return {};
  if (!render_special && (t_->attrs[id] & kAttrSpecial)) return {};
  return t_->pieces[id];
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool render_special) const {
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    std::string piece = token_to_piece(ids[i], render_special);
    if (i == 0 && t_->add_space_prefix && !piece.empty() && piece[0] == ' ') piece.erase(0, 1);
    out += piece;
  }
  return out;
}

int32_t BpeTokenizer::find_token(std::string_view text) const { return t_->lookup(text); }
int32_t BpeTokenizer::n_vocab() const { return static_cast<int32_t>(t_->texts.size()); }
int32_t BpeTokenizer::bos() const { return t_->bos; }
int32_t BpeTokenizer::eos() const { return t_->eos; }
int32_t BpeTokenizer::end_of_turn() const { return t_->eot; }
bool BpeTokenizer::add_bos() const { return t_->add_bos; }

bool BpeTokenizer::is_stop(int32_t id) const {
  return id >= 0 && id < n_vocab() && (id == t_->eos || t_->eog[id] != 0);
}

const std::string& BpeTokenizer::token_text(int32_t id) const {
  DSPARK_CHECK(id >= 0 && id < n_vocab());
  return t_->texts[id];
}

float BpeTokenizer::token_score(int32_t id) const {
  DSPARK_CHECK(id >= 0 && id < n_vocab());
  return t_->scores[id];
}

bool BpeTokenizer::is_control(int32_t id) const {
  return id >= 0 && id < n_vocab() && (t_->attrs[id] & kAttrSpecial) != 0;
}

Result<BpeTokenizer> load_bpe_tokenizer(const formats::GgufFile& file) {
  Result<Vocab> vocab = load_vocab(file);
  if (!vocab) return vocab.status();
  Result<BpeTokenizer> tok = BpeTokenizer::create(std::move(*vocab));
  if (!tok) return Status::error(file.path() + ": tokenizer: " + tok.message());
  return tok;
}

}  // namespace dspark::tokenizer
