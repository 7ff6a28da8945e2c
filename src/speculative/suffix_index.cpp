#include "speculative/suffix_index.h"

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <map>
#include <mutex>

#include "core/sha256.h"
#include "formats/mapped_file.h"

namespace dspark::speculative {

namespace {

// Header field offsets (suffix_index.h).
constexpr size_t kOffVersion = 8, kOffVocab = 12, kOffTokens = 16, kOffSuffixes = 24, kOffSeqs = 32,
                 kOffMetaBytes = 40, kOffFingerprint = 48, kOffSha = 112, kHexLen = 64;
constexpr size_t kPayloadAlign = 8;

void put_u32(Sha256* h, uint32_t v) {
  uint8_t b[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
  h->update(b, 4);
}

template <class T>
T read_at(const uint8_t* p, size_t off) {
  T v;
  std::memcpy(&v, p + off, sizeof v);
  return v;
}

template <class T>
void write_at(uint8_t* p, size_t off, T v) {
  std::memcpy(p + off, &v, sizeof v);
}

size_t padded_meta(size_t meta_bytes) { return (meta_bytes + kPayloadAlign - 1) / kPayloadAlign * kPayloadAlign; }

// Token `off` places into the suffix at SA slot i (in bounds: see range()).
struct At {
  const int32_t* s;
  const uint32_t* sa;
  int32_t operator()(uint64_t i, uint64_t off) const { return s[(uint64_t)sa[i] + off]; }
};

// Within [lo, hi), whose suffixes share their first `off` tokens (so the token at `off` is sorted),
// the first slot whose token at `off` is greater than t.
uint64_t group_end(const At& at, uint64_t lo, uint64_t hi, uint64_t off, int32_t t) {
  while (lo < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (at(mid, off) <= t) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}

// The largest group of the token at `off` in [lo, hi) (separator group left out): its token,
// bounds. Ties go to the smaller id (the first group met). count 0: no continuation.
struct Group {
  int32_t token = kSuffixSeparator;
  uint64_t lo = 0, hi = 0;
};
Group largest_group(const At& at, uint64_t lo, uint64_t hi, uint64_t off) {
  Group best;
  // A later group must be strictly larger to win, so once what is left is no larger, stop.
  for (uint64_t i = lo; i < hi && hi - i > best.hi - best.lo;) {
    const int32_t t = at(i, off);
    const uint64_t end = group_end(at, i, hi, off, t);
    if (t != kSuffixSeparator && end - i > best.hi - best.lo) best = {t, i, end};
    i = end;
  }
  return best;
}

}  // namespace

std::string tokenizer_fingerprint(const tokenizer::Tokenizer& tok) {
  Sha256 h;
  put_u32(&h, (uint32_t)tok.n_vocab());
  put_u32(&h, (uint32_t)tok.bos());
  put_u32(&h, (uint32_t)tok.eos());
  for (int32_t id = 0; id < tok.n_vocab(); ++id) {
    const std::string& t = tok.token_text(id);
    put_u32(&h, (uint32_t)t.size());
    h.update(t.data(), t.size());
  }
  return h.hex_digest();
}

std::vector<uint32_t> build_suffix_array(std::span<const int32_t> stream,
                                         const std::function<void(uint64_t)>& progress) {
  // Buckets by first token (counting sort, positions ascending), then each bucket sorted from the
  // second token on. The comparison is total (equal up to a separator: by position), so std::sort
  // gives one answer.
  int32_t max_id = 0;
  for (int32_t t : stream) max_id = std::max(max_id, t);
  std::vector<uint64_t> start((size_t)max_id + 2, 0);  // [max_id + 2] bucket starts
  for (int32_t t : stream)
    if (t != kSuffixSeparator) ++start[(size_t)t + 1];
  for (size_t i = 1; i < start.size(); ++i) start[i] += start[i - 1];
  std::vector<uint32_t> sa(start.back());
  std::vector<uint64_t> fill(start.begin(), start.end() - 1);
  for (uint64_t p = 0; p < stream.size(); ++p)
    if (stream[p] != kSuffixSeparator) sa[fill[(size_t)stream[p]]++] = (uint32_t)p;
  const int32_t* s = stream.data();
  auto less = [s](uint32_t a, uint32_t b) {
    for (uint64_t k = 1;; ++k) {
      const int32_t ta = s[(uint64_t)a + k], tb = s[(uint64_t)b + k];
      if (ta != tb) return ta < tb;
      if (ta == kSuffixSeparator) return a < b;
    }
  };
  for (size_t b = 0; b + 1 < start.size(); ++b) {
    std::sort(sa.begin() + (int64_t)start[b], sa.begin() + (int64_t)start[b + 1], less);
    if (progress) progress(start[b + 1]);
  }
  return sa;
}

Status write_suffix_index(const std::string& path, std::span<const int32_t> stream, std::span<const uint32_t> sa,
                          int32_t n_vocab, const std::string& fingerprint, const std::string& meta_json) {
  if (fingerprint.size() != kHexLen) return Status::error(path + ": the tokenizer fingerprint must be 64 hex digits");
  const uint64_t n_seqs = (uint64_t)std::count(stream.begin(), stream.end(), kSuffixSeparator);
  if (stream.empty() || stream.back() != kSuffixSeparator || sa.size() != stream.size() - n_seqs)
    return Status::error(path + ": stream and suffix array do not fit together");
  std::vector<uint8_t> meta(padded_meta(meta_json.size()), 0);
  std::memcpy(meta.data(), meta_json.data(), meta_json.size());
  Sha256 h;
  h.update(meta.data(), meta.size());
  h.update(stream.data(), stream.size_bytes());
  h.update(sa.data(), sa.size_bytes());
  uint8_t head[kSfxHeaderBytes] = {};
  std::memcpy(head, kSfxMagic, sizeof kSfxMagic);
  write_at<uint32_t>(head, kOffVersion, kSfxVersion);
  write_at<uint32_t>(head, kOffVocab, (uint32_t)n_vocab);
  write_at<uint64_t>(head, kOffTokens, stream.size());
  write_at<uint64_t>(head, kOffSuffixes, sa.size());
  write_at<uint64_t>(head, kOffSeqs, n_seqs);
  write_at<uint32_t>(head, kOffMetaBytes, (uint32_t)meta_json.size());
  std::memcpy(head + kOffFingerprint, fingerprint.data(), kHexLen);
  const std::string sha = h.hex_digest();
  std::memcpy(head + kOffSha, sha.data(), kHexLen);
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) return Status::error(tmp + ": cannot write");
    out.write((const char*)head, sizeof head);
    out.write((const char*)meta.data(), (std::streamsize)meta.size());
    out.write((const char*)stream.data(), (std::streamsize)stream.size_bytes());
    out.write((const char*)sa.data(), (std::streamsize)sa.size_bytes());
    if (!out.flush()) return Status::error(tmp + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) return Status::error(path + ": rename failed");
  return Status::ok();
}

Result<std::shared_ptr<const SuffixIndex>> SuffixIndex::open(const std::string& path, int32_t n_vocab,
                                                             const std::string& fingerprint) {
  auto mf = formats::MappedFile::open(path);
  if (!mf) return Status::error("suffix index " + mf.message());
  const uint8_t* p = (*mf)->data();
  const uint64_t size = (*mf)->size();
  const std::string where = "suffix index " + path + ": ";
  if (size < kSfxHeaderBytes)
    return Status::error(where + "truncated (" + std::to_string(size) + " bytes; the header alone is " +
                         std::to_string(kSfxHeaderBytes) + ")");
  if (std::memcmp(p, kSfxMagic, sizeof kSfxMagic) != 0)
    return Status::error(where + "not a suffix index (no DSPKSUFX magic; build one with dspark suffix-index build)");
  if (const uint32_t v = read_at<uint32_t>(p, kOffVersion); v != kSfxVersion)
    return Status::error(where + "format version " + std::to_string(v) + ", this build reads " +
                         std::to_string(kSfxVersion));
  const uint64_t n_tokens = read_at<uint64_t>(p, kOffTokens), n_sfx = read_at<uint64_t>(p, kOffSuffixes),
                 n_seqs = read_at<uint64_t>(p, kOffSeqs);
  const uint32_t meta_bytes = read_at<uint32_t>(p, kOffMetaBytes);
  // Sizes bounded first so the products cannot overflow (the stream is at most 2^32 tokens: u32 positions).
  constexpr uint64_t kMaxTokens = 1ull << 32;
  if (n_tokens == 0 || n_tokens > kMaxTokens || n_sfx > n_tokens || n_seqs != n_tokens - n_sfx)
    return Status::error(where + "inconsistent counts in the header (altered file)");
  const uint64_t want = kSfxHeaderBytes + padded_meta(meta_bytes) + 4 * n_tokens + 4 * n_sfx;
  if (size != want)
    return Status::error(where + "size " + std::to_string(size) + " bytes, the header says " + std::to_string(want) +
                         " (truncated or altered)");
  if (const uint32_t v = read_at<uint32_t>(p, kOffVocab); v != (uint32_t)n_vocab)
    return Status::error(where + "built for a vocabulary of " + std::to_string(v) + " tokens, the target has " +
                         std::to_string(n_vocab) + " (another model's index)");
  const std::string fp((const char*)p + kOffFingerprint, kHexLen);
  if (fp != fingerprint)
    return Status::error(where + "built for another tokenizer (fingerprint " + fp.substr(0, 12) + "..., the target's " +
                         fingerprint.substr(0, 12) + "...)");
  Sha256 h;
  h.update(p + kSfxHeaderBytes, size - kSfxHeaderBytes);
  const std::string sha = h.hex_digest(), said((const char*)p + kOffSha, kHexLen);
  if (sha != said)
    return Status::error(where + "payload sha256 " + sha.substr(0, 12) + "..., the header says " + said.substr(0, 12) +
                         "... (altered or corrupt)");
  std::shared_ptr<SuffixIndex> ix(new SuffixIndex());
  const uint8_t* payload = p + kSfxHeaderBytes;
  ix->meta_.assign((const char*)payload, meta_bytes);
  ix->stream_ = {(const int32_t*)(payload + padded_meta(meta_bytes)), (size_t)n_tokens};
  ix->sa_ = {(const uint32_t*)(payload + padded_meta(meta_bytes) + 4 * n_tokens), (size_t)n_sfx};
  // Bounds every query relies on: ids in [-1, n_vocab), the stream ends with a separator, each
  // array entry a non-separator position. (The order itself is not re-checked: a wrong order gives
  // wrong drafts, which verification rejects, never an out-of-bounds read.)
  uint64_t seps = 0;
  for (int32_t t : ix->stream_) {
    if (t < kSuffixSeparator || t >= n_vocab) return Status::error(where + "token id out of range (altered file)");
    seps += t == kSuffixSeparator;
  }
  if (ix->stream_.back() != kSuffixSeparator || seps != n_seqs)
    return Status::error(where + "the token stream is not separator-terminated sequences (altered file)");
  for (uint32_t pos : ix->sa_)
    if (pos >= n_tokens || ix->stream_[pos] == kSuffixSeparator)
      return Status::error(where + "suffix array entry out of range (altered file)");
  ix->file_ = std::move(mf).value();
  return std::shared_ptr<const SuffixIndex>(std::move(ix));
}

Result<std::shared_ptr<const SuffixIndex>> SuffixIndex::open_shared(const std::string& path, int32_t n_vocab,
                                                                    const std::string& fingerprint) {
  static std::mutex mu;
  static std::map<std::string, std::weak_ptr<const SuffixIndex>> open_files;  // key: path + fingerprint
  const std::string key = path + "\n" + fingerprint;
  std::lock_guard<std::mutex> lock(mu);
  if (auto live = open_files[key].lock()) return live;
  auto ix = open(path, n_vocab, fingerprint);
  if (ix) open_files[key] = *ix;
  return ix;
}

std::shared_ptr<const SuffixIndex> SuffixIndex::from_arrays(std::vector<int32_t> stream, std::vector<uint32_t> sa) {
  std::shared_ptr<SuffixIndex> ix(new SuffixIndex());
  ix->own_stream_ = std::move(stream);
  ix->own_sa_ = std::move(sa);
  ix->stream_ = ix->own_stream_;
  ix->sa_ = ix->own_sa_;
  return ix;
}

std::pair<uint64_t, uint64_t> SuffixIndex::range(std::span<const int32_t> pattern) const {
  // Compares the suffix at slot i with the pattern over the pattern's length: <0, 0, >0. Stops at
  // the first difference, at the latest the separator ending the suffix's sequence (the pattern
  // holds none), so it never reads past the stream.
  auto cmp = [&](uint64_t i) {
    const int32_t* s = stream_.data() + sa_[i];
    for (size_t k = 0; k < pattern.size(); ++k)
      if (s[k] != pattern[k]) return s[k] < pattern[k] ? -1 : 1;
    return 0;
  };
  uint64_t lo = 0, hi = sa_.size();
  while (lo < hi) {  // first slot not below the pattern
    const uint64_t mid = lo + (hi - lo) / 2;
    if (cmp(mid) < 0) lo = mid + 1;
    else hi = mid;
  }
  uint64_t end = lo, top = sa_.size();
  while (end < top) {  // first slot above it
    const uint64_t mid = end + (top - end) / 2;
    if (cmp(mid) <= 0) end = mid + 1;
    else top = mid;
  }
  return {lo, end};
}

namespace {

// Continues `out` (which holds the matched context's count) from the occurrences [lo, hi) that share
// the context and out's tokens so far, m tokens of context: the most frequent next token while its
// share of the context's occurrences is at least min_prob, up to max_n tokens in all.
void continue_proposal(const At& at, uint64_t lo, uint64_t hi, int m, const SuffixQueryConfig& cfg, int max_n,
                       SuffixProposal* out) {
  for (int k = (int)out->tokens.size(); k < max_n; ++k) {
    const Group g = largest_group(at, lo, hi, (uint64_t)(m + k));
    const uint64_t n = g.hi - g.lo;
    if (n == 0 || (double)n < cfg.min_prob * (double)out->context_count) break;
    out->tokens.push_back(g.token);
    out->support.push_back((uint32_t)n);
    lo = g.lo;
    hi = g.hi;
  }
}

}  // namespace

SuffixProposal SuffixIndex::propose(std::span<const int32_t> context, const SuffixQueryConfig& cfg, int max_n) const {
  SuffixBranches b = propose_branches(context, cfg, max_n, 1);
  return b.empty() ? SuffixProposal{} : std::move(b.front());
}

SuffixBranches SuffixIndex::propose_branches(std::span<const int32_t> context, const SuffixQueryConfig& cfg, int max_n,
                                             int width) const {
  SuffixBranches out;
  if (max_n <= 0 || width <= 0) return out;
  const At at{stream_.data(), sa_.data()};
  const int longest = (int)std::min<size_t>((size_t)cfg.max_context, context.size());
  for (int m = longest; m >= cfg.min_context && m >= 1; --m) {
    const auto pattern = context.last((size_t)m);
    if (std::any_of(pattern.begin(), pattern.end(), [](int32_t t) { return t < 0; })) continue;
    auto [lo, hi] = range(pattern);
    lo = group_end(at, lo, hi, (uint64_t)m, kSuffixSeparator);  // drop the occurrences that end their sequence
    if (lo == hi) continue;
    SuffixProposal base;
    base.context_len = m;
    base.context_count = (uint32_t)(hi - lo);
    if (width == 1) {  // propose(): the largest group only
      continue_proposal(at, lo, hi, m, cfg, max_n, &base);
      out.push_back(std::move(base));
      return out;
    }
    // Every first-token group (sorted by token within [lo, hi)), largest first, ties to the smaller id.
    std::vector<Group> groups;
    for (uint64_t i = lo; i < hi;) {
      const int32_t t = at(i, (uint64_t)m);
      const uint64_t end = group_end(at, i, hi, (uint64_t)m, t);
      if (t != kSuffixSeparator) groups.push_back({t, i, end});
      i = end;
    }
    std::stable_sort(groups.begin(), groups.end(),
                     [](const Group& a, const Group& b) { return a.hi - a.lo > b.hi - b.lo; });
    for (const Group& g : groups) {
      if ((int)out.size() == width || (double)(g.hi - g.lo) < cfg.min_prob * (double)base.context_count) break;
      SuffixProposal p = base;
      p.tokens.push_back(g.token);
      p.support.push_back((uint32_t)(g.hi - g.lo));
      continue_proposal(at, g.lo, g.hi, m, cfg, max_n, &p);
      out.push_back(std::move(p));
    }
    if (out.empty()) out.push_back(std::move(base));  // a match whose continuations are all too rare
    return out;
  }
  return out;
}

SuffixProposal propose_by_scan(std::span<const int32_t> stream, std::span<const int32_t> context,
                               const SuffixQueryConfig& cfg, int max_n) {
  SuffixProposal out;
  if (max_n <= 0) return out;
  const int longest = (int)std::min<size_t>((size_t)cfg.max_context, context.size());
  for (int m = longest; m >= cfg.min_context && m >= 1; --m) {
    const auto pattern = context.last((size_t)m);
    if (std::any_of(pattern.begin(), pattern.end(), [](int32_t t) { return t < 0; })) continue;
    // Every start whose m tokens equal the pattern and whose next token is not a separator.
    std::vector<uint64_t> starts;
    for (uint64_t p = 0; p + (uint64_t)m < stream.size(); ++p)
      if (std::equal(pattern.begin(), pattern.end(), stream.begin() + (int64_t)p) &&
          stream[p + (uint64_t)m] != kSuffixSeparator)
        starts.push_back(p);
    if (starts.empty()) continue;
    out.context_len = m;
    out.context_count = (uint32_t)starts.size();
    for (int k = 0; k < max_n; ++k) {
      std::map<int32_t, uint32_t> counts;  // next token -> occurrences (ordered: ties to the smaller id)
      for (uint64_t p : starts)
        if (const int32_t t = stream[p + (uint64_t)(m + k)]; t != kSuffixSeparator) ++counts[t];
      int32_t best = kSuffixSeparator;
      uint32_t n = 0;
      for (const auto& [t, c] : counts)
        if (c > n) best = t, n = c;
      if (n == 0 || (double)n < cfg.min_prob * (double)out.context_count) break;
      out.tokens.push_back(best);
      out.support.push_back(n);
      std::erase_if(starts, [&](uint64_t p) { return stream[p + (uint64_t)(m + k)] != best; });
    }
    return out;
  }
  return out;
}

}  // namespace dspark::speculative
