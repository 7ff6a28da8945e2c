// Pre-tokenizers (pretokenize.h) against llama.cpp's unicode_regex_split: every expected split
// below was produced by llama.cpp's own src/unicode.cpp (commit 0c1e570, the one llama-cpp-python
// 0.3.36 vendors) with the regex lists llm_tokenizer_bpe uses for each family. They cover
// contractions (and the case-insensitive ones of llama3 / qwen2), digit grouping, runs of spaces
// before words and at the end, newlines and CR LF, tabs, non-ASCII letters, marks and punctuation,
// emoji, Unicode white space, unassigned code points and invalid UTF-8 (U+FFFD per bad byte,
// overlong forms decoded).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tokenizer/pretokenize.h"
#include "tokenizer/unicode_data.h"

namespace dspark::tokenizer {
namespace {

using Words = std::vector<std::string>;

struct SplitCase {
  const char* name;
  std::string text;
  Words gpt2, smollm, def, llama3, qwen2;
};

// clang-format off
const SplitCase kCases[] = {
    {"contractions", "I'm sure they'll say it's 'quoted' -- we've we'D YOU'RE",
     {"I", "'m", " sure", " they", "'ll", " say", " it", "'s", " '", "quoted", "'", " --", " we",
      "'ve", " we", "'", "D", " YOU", "'", "RE"},
     {"I", "'m", " sure", " they", "'ll", " say", " it", "'s", " '", "quoted", "'", " --", " we",
      "'ve", " we", "'", "D", " YOU", "'", "RE"},
     {"I", "'", "m", " sure", " they", "'", "ll", " say", " it", "'", "s", " ", "'", "quoted", "'",
      " ", "--", " we", "'", "ve", " we", "'", "D", " YOU", "'", "RE"},
     {"I", "'m", " sure", " they", "'ll", " say", " it", "'s", " '", "quoted", "'", " --", " we",
      "'ve", " we", "'D", " YOU", "'RE"},
     {"I", "'m", " sure", " they", "'ll", " say", " it", "'s", " '", "quoted", "'", " --", " we",
      "'ve", " we", "'D", " YOU", "'RE"}},
    {"numbers", "Price: $1234567.89 or 12,345 \xC2\xBD \xD9\xA3\xD9\xA4",
     {"Price", ":", " $", "1234567", ".", "89", " or", " 12", ",", "345", " \xC2\xBD",
      " \xD9\xA3\xD9\xA4"},
     {"Price", ":", " $", "1", "2", "3", "4", "5", "6", "7", ".", "8", "9", " or", " ", "1", "2",
      ",", "3", "4", "5", " ", "\xC2\xBD", " ", "\xD9\xA3", "\xD9\xA4"},
     {"Price", ":", " ", "$", "123", "456", "7", ".", "89", " or", " ", "12", ",", "345", " ",
      "\xC2\xBD", " ", "\xD9\xA3\xD9\xA4"},
     {"Price", ":", " $", "123", "456", "7", ".", "89", " or", " ", "12", ",", "345", " ",
      "\xC2\xBD", " ", "\xD9\xA3\xD9\xA4"},
     {"Price", ":", " $", "1", "2", "3", "4", "5", "6", "7", ".", "8", "9", " or", " ", "1", "2",
      ",", "3", "4", "5", " ", "\xC2\xBD", " ", "\xD9\xA3", "\xD9\xA4"}},
    {"space_runs", "a  b   c    \n",
     {"a", " ", " b", "  ", " c", "    \n"},
     {"a", " ", " b", "  ", " c", "    \n"},
     {"a", " ", " b", "  ", " c", "    \n"},
     {"a", " ", " b", "  ", " c", "    \n"},
     {"a", " ", " b", "  ", " c", "    \n"}},
    {"newlines", "x\n\n  y\r\n z",
     {"x", "\n\n ", " y", "\r\n", " z"},
     {"x", "\n\n ", " y", "\r\n", " z"},
     {"x", "\n\n ", " y", "\r\n", " z"},
     {"x", "\n\n", " ", " y", "\r\n", " z"},
     {"x", "\n\n", " ", " y", "\r\n", " z"}},
    {"tabs", "tab\there\t\tend \t",
     {"tab", "\t", "here", "\t", "\t", "end", " \t"},
     {"tab", "\t", "here", "\t", "\t", "end", " \t"},
     {"tab", "\t", "here", "\t", "\t", "end", " \t"},
     {"tab", "\there", "\t", "\tend", " \t"},
     {"tab", "\there", "\t", "\tend", " \t"}},
    {"latin_punctuation",  // Grüße, naïve café — «ok» ¿sí?
     "Gr\xC3\xBC\xC3\x9F" "e, na\xC3\xAFve caf\xC3\xA9 \xE2\x80\x94 \xC2\xABok\xC2\xBB \xC2\xBFs\xC3\xAD?",
     {"Gr\xC3\xBC\xC3\x9F" "e", ",", " na\xC3\xAFve", " caf\xC3\xA9", " \xE2\x80\x94", " \xC2\xAB",
      "ok", "\xC2\xBB", " \xC2\xBF", "s\xC3\xAD", "?"},
     {"Gr\xC3\xBC\xC3\x9F" "e", ",", " na\xC3\xAFve", " caf\xC3\xA9", " \xE2\x80\x94", " \xC2\xAB",
      "ok", "\xC2\xBB", " \xC2\xBF", "s\xC3\xAD", "?"},
     {"Gr\xC3\xBC\xC3\x9F" "e", ",", " na\xC3\xAFve", " caf\xC3\xA9", " ", "\xE2\x80\x94", " ",
      "\xC2\xAB", "ok", "\xC2\xBB", " ", "\xC2\xBF", "s\xC3\xAD", "?"},
     {"Gr\xC3\xBC\xC3\x9F" "e", ",", " na\xC3\xAFve", " caf\xC3\xA9", " \xE2\x80\x94", " \xC2\xAB",
      "ok", "\xC2\xBB", " \xC2\xBF", "s\xC3\xAD", "?"},
     {"Gr\xC3\xBC\xC3\x9F" "e", ",", " na\xC3\xAFve", " caf\xC3\xA9", " \xE2\x80\x94", " \xC2\xAB",
      "ok", "\xC2\xBB", " \xC2\xBF", "s\xC3\xAD", "?"}},
    {"cjk_devanagari_cyrillic",  // 你好，世界！ नमस्ते Привет
     "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C\xEF\xBC\x81 "
     "\xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8\xE0\xA5\x8D\xE0\xA4\xA4\xE0\xA5\x87 "
     "\xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82",
     {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xE4\xB8\x96\xE7\x95\x8C", "\xEF\xBC\x81",
      " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D", "\xE0\xA4\xA4", "\xE0\xA5\x87",
      " \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"},
     {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xE4\xB8\x96\xE7\x95\x8C", "\xEF\xBC\x81",
      " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D", "\xE0\xA4\xA4", "\xE0\xA5\x87",
      " \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"},
     {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C", "\xE4\xB8\x96\xE7\x95\x8C", "\xEF\xBC\x81",
      " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D", "\xE0\xA4\xA4", "\xE0\xA5\x87",
      " \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"},
     {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", "\xEF\xBC\x81",
      " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D\xE0\xA4\xA4", "\xE0\xA5\x87",
      " \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"},
     {"\xE4\xBD\xA0\xE5\xA5\xBD", "\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C", "\xEF\xBC\x81",
      " \xE0\xA4\xA8\xE0\xA4\xAE\xE0\xA4\xB8", "\xE0\xA5\x8D\xE0\xA4\xA4", "\xE0\xA5\x87",
      " \xD0\x9F\xD1\x80\xD0\xB8\xD0\xB2\xD0\xB5\xD1\x82"}},
    {"emoji", "emoji \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD ok\xF0\x9F\xA6\x84!",
     {"emoji", " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok", "\xF0\x9F\xA6\x84!"},
     {"emoji", " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok", "\xF0\x9F\xA6\x84!"},
     {"emoji", " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok", "\xF0\x9F\xA6\x84", "!"},
     {"emoji", " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok", "\xF0\x9F\xA6\x84!"},
     {"emoji", " \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD", " ok", "\xF0\x9F\xA6\x84!"}},
    {"invalid_utf8", "bad \xFF\xFE utf8 \xC3 end \xED\xA0\x80 \xC0\x80",
     {"bad", " \xEF\xBF\xBD\xEF\xBF\xBD", " utf", "8", " \xEF\xBF\xBD", " end", " \xED\xA0\x80",
      std::string(" \0", 2)},
     {"bad", " \xEF\xBF\xBD\xEF\xBF\xBD", " utf", "8", " \xEF\xBF\xBD", " end", " \xED\xA0\x80",
      std::string(" \0", 2)},
     {"bad", " \xEF\xBF\xBD\xEF\xBF\xBD", " utf", "8", " \xEF\xBF\xBD", " end", " \xED\xA0\x80",
      std::string(" \0", 2)},
     {"bad", " \xEF\xBF\xBD\xEF\xBF\xBD", " utf", "8", " \xEF\xBF\xBD", " end", " \xED\xA0\x80",
      std::string(" \0", 2)},
     {"bad", " \xEF\xBF\xBD\xEF\xBF\xBD", " utf", "8", " \xEF\xBF\xBD", " end", " \xED\xA0\x80",
      std::string(" \0", 2)}},
    {"edge_spaces", "  leading and trailing  ",
     {" ", " leading", " and", " trailing", "  "},
     {" ", " leading", " and", " trailing", "  "},
     {" ", " leading", " and", " trailing", "  "},
     {" ", " leading", " and", " trailing", "  "},
     {" ", " leading", " and", " trailing", "  "}},
    {"ascii_symbols", "a`b^c|d~e=f<g>h+i$j_k",
     {"a", "`", "b", "^", "c", "|", "d", "~", "e", "=", "f", "<", "g", ">", "h", "+", "i", "$",
      "j", "_", "k"},
     {"a", "`", "b", "^", "c", "|", "d", "~", "e", "=", "f", "<", "g", ">", "h", "+", "i", "$",
      "j", "_", "k"},
     {"a", "`", "b", "^", "c", "|", "d", "~", "e", "=", "f", "<", "g", ">", "h", "+", "i", "$",
      "j", "_", "k"},
     {"a", "`b", "^c", "|d", "~e", "=f", "<g", ">h", "+i", "$j", "_k"},
     {"a", "`b", "^c", "|d", "~e", "=f", "<g", ">h", "+i", "$j", "_k"}},
    {"unicode_spaces_marks_unassigned",  // NBSP, ideographic space, U+2028, e + U+0301, U+0378, U+001C
     "a\xC2\xA0" "b\xE3\x80\x80 c\xE2\x80\xA8" "d e\xCC\x81 \xCD\xB8x \x1Cy",
     {"a", "\xC2\xA0", "b", "\xE3\x80\x80", " c", "\xE2\x80\xA8", "d", " e", "\xCC\x81",
      " \xCD\xB8", "x", " \x1C", "y"},
     {"a", "\xC2\xA0", "b", "\xE3\x80\x80", " c", "\xE2\x80\xA8", "d", " e", "\xCC\x81",
      " \xCD\xB8", "x", " \x1C", "y"},
     {"a", "\xC2\xA0", "b", "\xE3\x80\x80", " c", "\xE2\x80\xA8", "d", " e", "\xCC\x81",
      " \xCD\xB8", "x", " \x1C", "y"},
     {"a", "\xC2\xA0" "b", "\xE3\x80\x80", " c", "\xE2\x80\xA8" "d", " e", "\xCC\x81", " \xCD\xB8",
      "x", " \x1C", "y"},
     {"a", "\xC2\xA0" "b", "\xE3\x80\x80", " c", "\xE2\x80\xA8" "d", " e", "\xCC\x81", " \xCD\xB8",
      "x", " \x1C", "y"}},
    {"contraction_edges", "it' 1's 'S'T'M'D'LL 'Ve x'\xE2\x84\xAA '",
     {"it", "'", " 1", "'s", " '", "S", "'", "T", "'", "M", "'", "D", "'", "LL", " '", "Ve", " x",
      "'", "\xE2\x84\xAA", " '"},
     {"it", "'", " ", "1", "'s", " '", "S", "'", "T", "'", "M", "'", "D", "'", "LL", " '", "Ve",
      " x", "'", "\xE2\x84\xAA", " '"},
     {"it", "'", " ", "1", "'", "s", " ", "'", "S", "'", "T", "'", "M", "'", "D", "'", "LL", " ",
      "'", "Ve", " x", "'", "\xE2\x84\xAA", " ", "'"},
     {"it", "'", " ", "1", "'s", " '", "S", "'T", "'M", "'D", "'LL", " '", "Ve", " x",
      "'\xE2\x84\xAA", " '"},
     {"it", "'", " ", "1", "'s", " '", "S", "'T", "'M", "'D", "'LL", " '", "Ve", " x",
      "'\xE2\x84\xAA", " '"}},
    {"space_before_punctuation", "hi ! end . x. \n",
     {"hi", " !", " end", " .", " x", ".", " \n"},
     {"hi", " !", " end", " .", " x", ".", " \n"},
     {"hi", " ", "!", " end", " ", ".", " x", ".", " \n"},
     {"hi", " !", " end", " .", " x", ".", " \n"},
     {"hi", " !", " end", " .", " x", ".", " \n"}},
    {"digit_runs", " 1 22 333 4444 55555",
     {" 1", " 22", " 333", " 4444", " 55555"},
     {" ", "1", " ", "2", "2", " ", "3", "3", "3", " ", "4", "4", "4", "4", " ", "5", "5", "5",
      "5", "5"},
     {" ", "1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55"},
     {" ", "1", " ", "22", " ", "333", " ", "444", "4", " ", "555", "55"},
     {" ", "1", " ", "2", "2", " ", "3", "3", "3", " ", "4", "4", "4", "4", " ", "5", "5", "5",
      "5", "5"}},
};
// clang-format on

TEST(BpePretokenize, MatchesLlamaCppSplits) {
  for (const SplitCase& c : kCases) {
    SCOPED_TRACE(c.name);
    EXPECT_EQ(pretokenize_text(PreTokenizerKind::kGpt2, c.text), c.gpt2);
    EXPECT_EQ(pretokenize_text(PreTokenizerKind::kSmollm, c.text), c.smollm);
    EXPECT_EQ(pretokenize_text(PreTokenizerKind::kDefault, c.text), c.def);
    EXPECT_EQ(pretokenize_text(PreTokenizerKind::kLlama3, c.text), c.llama3);
    EXPECT_EQ(pretokenize_text(PreTokenizerKind::kQwen2, c.text), c.qwen2);
  }
}

TEST(BpePretokenize, WordsCoverTheTextInOrder) {
  for (const SplitCase& c : kCases) {
    for (PreTokenizerKind kind : {PreTokenizerKind::kGpt2, PreTokenizerKind::kSmollm,
                                  PreTokenizerKind::kDefault, PreTokenizerKind::kLlama3,
                                  PreTokenizerKind::kQwen2}) {
      std::vector<uint32_t> cpts;
      decode_utf8_lax(c.text, &cpts);
      std::vector<size_t> lengths;
      pretokenize(kind, cpts, &lengths);
      size_t total = 0;
      for (size_t n : lengths) {
        EXPECT_GT(n, 0u) << c.name;
        total += n;
      }
      EXPECT_EQ(total, cpts.size()) << c.name;
    }
  }
  std::vector<size_t> lengths = {7};
  pretokenize(PreTokenizerKind::kGpt2, {}, &lengths);
  EXPECT_TRUE(lengths.empty());
}

TEST(BpePretokenize, LaxUtf8DecodingAsLlamaCpp) {
  auto decode = [](std::string_view s) {
    std::vector<uint32_t> cpts;
    decode_utf8_lax(s, &cpts);
    return cpts;
  };
  using Cpts = std::vector<uint32_t>;
  EXPECT_EQ(decode("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80"), (Cpts{'a', 0xE9, 0x20AC, 0x1F600}));
  EXPECT_EQ(decode("\x80\xBF"), (Cpts{0xFFFD, 0xFFFD}));            // stray continuation bytes
  EXPECT_EQ(decode("\xE2\x82"), (Cpts{0xFFFD, 0xFFFD}));            // truncated: one per byte
  EXPECT_EQ(decode("\xC0\x80"), (Cpts{0}));                         // overlong NUL passes
  EXPECT_EQ(decode("\xED\xA0\x80"), (Cpts{0xD800}));               // surrogate passes
  EXPECT_EQ(decode("\xF8\x88\x80\x80\x80"), (Cpts(5, 0xFFFD)));  // 5-byte form
  // Above U+10FFFF llama.cpp throws later; here the lead byte is invalid like the rest.
  EXPECT_EQ(decode("\xF4\x90\x80\x80"), (Cpts(4, 0xFFFD)));
  std::string s;
  for (uint32_t cp : {0x41u, 0xE9u, 0x20ACu, 0x1F600u, 0xD800u}) append_utf8(cp, &s);
  EXPECT_EQ(s, "A\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\xED\xA0\x80");
}

TEST(BpePretokenize, NamesFollowLlamaCpp) {
  struct Name {
    const char* pre;
    PreTokenizerKind kind;
    bool ignore_merges, add_bos;
  };
  const Name names[] = {
      {"default", PreTokenizerKind::kDefault, false, false},
      {"gpt-2", PreTokenizerKind::kGpt2, false, false},
      {"gpt2", PreTokenizerKind::kGpt2, false, false},
      {"smollm", PreTokenizerKind::kSmollm, false, false},
      {"starcoder", PreTokenizerKind::kSmollm, false, false},
      {"llama3", PreTokenizerKind::kLlama3, true, true},
      {"llama-bpe", PreTokenizerKind::kLlama3, true, true},
      {"dbrx", PreTokenizerKind::kLlama3, false, false},
      {"qwen2", PreTokenizerKind::kQwen2, false, false},
  };
  for (const Name& n : names) {
    Result<PreTokenizerSpec> spec = find_pre_tokenizer(n.pre);
    ASSERT_TRUE(spec.is_ok()) << n.pre << ": " << spec.message();
    EXPECT_EQ(spec->kind, n.kind) << n.pre;
    EXPECT_EQ(spec->ignore_merges, n.ignore_merges) << n.pre;
    EXPECT_EQ(spec->default_add_bos, n.add_bos) << n.pre;
  }
  for (const char* bad : {"", "Smollm", "deepseek-llm", "tekken", "gpt-4o", "no such\x01"}) {
    Result<PreTokenizerSpec> spec = find_pre_tokenizer(bad);
    ASSERT_FALSE(spec.is_ok()) << bad;
    EXPECT_NE(spec.message().find("tokenizer.ggml.pre"), std::string::npos) << spec.message();
  }
}

TEST(BpeUnicodeData, ClassesOfKnownCodePoints) {
  using unicode::CharClass;
  EXPECT_EQ(unicode::char_class('a'), CharClass::kLetter);
  EXPECT_EQ(unicode::char_class('7'), CharClass::kNumber);
  EXPECT_EQ(unicode::char_class('$'), CharClass::kSymbol);
  EXPECT_EQ(unicode::char_class('_'), CharClass::kPunct);
  EXPECT_EQ(unicode::char_class(' '), CharClass::kOther);
  EXPECT_EQ(unicode::char_class(0x00BD), CharClass::kNumber);   // ½
  EXPECT_EQ(unicode::char_class(0x0301), CharClass::kMark);
  EXPECT_EQ(unicode::char_class(0x4F60), CharClass::kLetter);   // 你
  EXPECT_EQ(unicode::char_class(0x1F600), CharClass::kSymbol);  // 😀
  EXPECT_EQ(unicode::char_class(0x0378), CharClass::kOther);    // unassigned
  EXPECT_EQ(unicode::char_class(0x2FFC), CharClass::kSymbol);   // new in Unicode 15.1
  EXPECT_EQ(unicode::char_class(0x31350), CharClass::kLetter);  // CJK extension H (15.0)
  EXPECT_EQ(unicode::char_class(0x10FFFF), CharClass::kOther);
  EXPECT_EQ(unicode::char_class(0x110000), CharClass::kOther);
  EXPECT_TRUE(unicode::is_whitespace(0x3000));
  EXPECT_TRUE(unicode::is_whitespace(0x85));
  EXPECT_FALSE(unicode::is_whitespace(0x1C));  // Python's isspace() says yes; White_Space no
  EXPECT_FALSE(unicode::is_whitespace(0x200B));
  EXPECT_EQ(unicode::lowercase_if_ascii('S'), 's');
  EXPECT_EQ(unicode::lowercase_if_ascii(0x212A), 'k');
  EXPECT_EQ(unicode::lowercase_if_ascii(0x00C9), 0x00C9u);  // É lowers to é, not ASCII
  EXPECT_STREQ(unicode::kUnicodeVersion, "15.1.0");
}

}  // namespace
}  // namespace dspark::tokenizer
