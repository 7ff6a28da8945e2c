// libFuzzer target: BpeTokenizer on a random vocabulary (specials, byte alphabet, merges, pre) and
// random text. Findings: any crash, sanitizer report, abort (DSPARK_CHECK), or
//  - create() failing on a vocabulary that is valid by construction, or succeeding on one with a
//    merge that names no token;
//  - an id outside the vocabulary;
//  - encode() differing from a naive reference (pre-tokenize, then repeatedly merge the adjacent
//    pair of lowest rank, leftmost on ties; unknown symbols fall back to single-byte tokens);
//  - decode(encode(text)) != text for valid UTF-8 text when every byte and every merge result is
//    a token and specials are not parsed.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/status.h"
#include "tokenizer/bpe.h"
#include "tokenizer/pretokenize.h"
#include "tokenizer/utf8.h"

using dspark::Result;
using dspark::tokenizer::BpeTokenizer;
using dspark::tokenizer::TokenType;
using dspark::tokenizer::Vocab;

namespace {

constexpr const char* kPres[] = {"gpt2", "smollm", "default", "llama3", "qwen2", "dbrx", "bad-pre"};

bool printable(unsigned b) { return (b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE; }

// The GPT-2 byte alphabet, written independently of bpe.cpp.
std::vector<std::string> alphabet() {
  std::vector<std::string> out(256);
  uint32_t next = 256;
  for (unsigned b = 0; b < 256; ++b) {
    const uint32_t cp = printable(b) ? b : next++;
    std::string s;
    if (cp < 0x80) {
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    out[b] = s;
  }
  return out;
}

// Naive BPE of one word (raw bytes), as llama.cpp's session defines it.
std::vector<int32_t> naive_word(const std::string& word, const std::vector<std::string>& abc,
                                const std::map<std::string, int32_t>& ids,
                                const std::map<std::pair<std::string, std::string>, int32_t>& ranks,
                                bool ignore_merges) {
  std::vector<std::string> syms;
  std::string whole;
  for (unsigned char b : word) {
    syms.push_back(abc[b]);
    whole += abc[b];
  }
  std::vector<int32_t> out;
  if (ignore_merges) {
    if (auto it = ids.find(whole); it != ids.end()) return {it->second};
  }
  for (;;) {
    int32_t best = -1;
    size_t at = 0;
    for (size_t i = 0; i + 1 < syms.size(); ++i) {
      auto it = ranks.find({syms[i], syms[i + 1]});
      if (it != ranks.end() && (best < 0 || it->second < best)) {
        best = it->second;
        at = i;
      }
    }
    if (best < 0) break;
    syms[at] += syms[at + 1];
    syms.erase(syms.begin() + static_cast<long>(at) + 1);
  }
  for (const std::string& s : syms) {
    if (auto it = ids.find(s); it != ids.end()) {
      out.push_back(it->second);
      continue;
    }
    for (char c : s) {
      if (auto it = ids.find(std::string(1, c)); it != ids.end()) out.push_back(it->second);
    }
  }
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  static const std::vector<std::string> abc = alphabet();
  const char* pre = kPres[in.ConsumeIntegralInRange<size_t>(0, std::size(kPres) - 1)];
  const bool full_alphabet = in.ConsumeBool();   // every byte is a token
  const bool closed_merges = in.ConsumeBool();   // every merge result is a token
  const bool bad_merge = in.ConsumeIntegralInRange<int>(0, 15) == 0;

  Vocab v;
  v.model = "gpt2";
  v.pre = pre;
  std::set<std::string> texts;
  std::vector<int32_t> normal;  // ids of NORMAL tokens, merge material
  auto add = [&](const std::string& text, TokenType type) {
    if (text.empty() || !texts.insert(text).second) return -1;
    v.tokens.push_back(text);
    v.scores.push_back(0);
    v.types.push_back(static_cast<int32_t>(type));
    return static_cast<int32_t>(v.tokens.size()) - 1;
  };
  const int n_special = in.ConsumeIntegralInRange<int>(0, 4);
  for (int i = 0; i < n_special; ++i) {
    const std::string body = in.ConsumeRandomLengthString(6);
    add("<|" + body + "|>", in.ConsumeBool() ? TokenType::kControl : TokenType::kUserDefined);
  }
  for (unsigned b = 0; b < 256; ++b) {
    if (full_alphabet || in.ConsumeBool()) {
      if (const int32_t id = add(abc[b], TokenType::kNormal); id >= 0) normal.push_back(id);
    }
  }
  if (normal.empty()) return 0;
  const int n_merges = in.ConsumeIntegralInRange<int>(0, 48);
  for (int i = 0; i < n_merges; ++i) {
    const std::string l = v.tokens[normal[in.ConsumeIntegralInRange<size_t>(0, normal.size() - 1)]];
    const std::string r = v.tokens[normal[in.ConsumeIntegralInRange<size_t>(0, normal.size() - 1)]];
    v.merges.push_back(l + " " + r);
    if (closed_merges || in.ConsumeBool()) {
      if (const int32_t id = add(l + r, TokenType::kNormal); id >= 0) normal.push_back(id);
    }
  }
  if (bad_merge) v.merges.push_back(abc['a'] + " \x01nope");
  v.bos = v.eos = static_cast<int32_t>(v.tokens.size()) - 1;
  v.unk = v.pad = -1;
  v.add_bos = in.ConsumeBool();
  v.add_eos = in.ConsumeBool();
  v.add_space_prefix = false;
  const std::string text = in.ConsumeRemainingBytesAsString();

  Result<BpeTokenizer> tok = BpeTokenizer::create(v);
  const bool valid_pre = dspark::tokenizer::find_pre_tokenizer(pre).is_ok();
  DSPARK_CHECK(tok.is_ok() == (valid_pre && !bad_merge));
  if (!tok.is_ok()) {
    DSPARK_CHECK(!tok.message().empty());
    return 0;
  }
  const BpeTokenizer& t = *tok;
  const bool parse_special = !text.empty() && (static_cast<unsigned char>(text[0]) & 1);
  const std::vector<int32_t> ids = t.encode(text, false, parse_special);
  for (int32_t id : ids) DSPARK_CHECK(id >= 0 && id < t.n_vocab());
  const std::vector<int32_t> with_special = t.encode(text, true, parse_special);
  DSPARK_CHECK(with_special.size() == ids.size() + v.add_bos + v.add_eos);
  (void)t.decode(ids, true);
  for (int32_t id : {-1, 0, t.n_vocab() - 1, t.n_vocab()}) (void)t.token_to_piece(id, true);

  // Reference encode when no special token can split the text. Merges may build texts llama.cpp
  // turns special ("</s>", "[EOT]", "<|channel|>", ...): all of them contain '<' or '['.
  bool special_free = true;
  for (size_t id = 0; id < v.tokens.size(); ++id) {
    const std::string& s = v.tokens[id];
    const bool maybe_special = v.types[id] != static_cast<int32_t>(TokenType::kNormal) ||
                               s.find_first_of("<[") != std::string::npos;
    if (maybe_special && text.find(s) != std::string::npos) special_free = false;
  }
  if (special_free) {
    std::map<std::string, int32_t> id_of;
    for (size_t id = 0; id < v.tokens.size(); ++id) id_of[v.tokens[id]] = static_cast<int32_t>(id);
    std::map<std::pair<std::string, std::string>, int32_t> ranks;
    for (size_t i = 0; i < v.merges.size(); ++i) {
      const size_t sp = v.merges[i].find(' ', 1);
      ranks.emplace(std::make_pair(v.merges[i].substr(0, sp), v.merges[i].substr(sp + 1)),
                    static_cast<int32_t>(i));
    }
    const auto spec = dspark::tokenizer::find_pre_tokenizer(pre);
    std::vector<int32_t> expect;
    for (const std::string& w : dspark::tokenizer::pretokenize_text(spec->kind, text)) {
      for (int32_t id : naive_word(w, abc, id_of, ranks, spec->ignore_merges)) expect.push_back(id);
    }
    DSPARK_CHECK(ids == expect);
  }
  if (special_free && full_alphabet && closed_merges && !parse_special &&
      dspark::tokenizer::is_valid_utf8(text)) {
    DSPARK_CHECK(t.decode(ids) == text);
  }
  return 0;
}
