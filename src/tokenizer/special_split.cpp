#include "tokenizer/special_split.h"

#include <algorithm>

namespace dspark::tokenizer {

void SpecialSplitter::build(const std::vector<std::string>& texts, std::vector<int32_t> ids,
                            const std::function<bool(int32_t)>& parse_only) {
  specials_ = std::move(ids);
  std::sort(specials_.begin(), specials_.end(),
            [&](int32_t a, int32_t b) { return texts[a].size() > texts[b].size(); });
  parse_only_.clear();
  for (int32_t id : specials_) parse_only_.push_back(parse_only(id) ? 1 : 0);
  node_rank_.assign(1, -1);  // root
  node_child_.clear();
  for (size_t rank = 0; rank < specials_.size(); ++rank) {
    int32_t node = 0;
    for (unsigned char c : texts[specials_[rank]]) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | c;
      auto it = node_child_.find(key);
      if (it == node_child_.end()) {
        it = node_child_.emplace(key, static_cast<int32_t>(node_rank_.size())).first;
        node_rank_.push_back(-1);
      }
      node = it->second;
    }
    node_rank_[node] = static_cast<int32_t>(rank);
  }
}

void SpecialSplitter::partition(std::string_view text, bool parse_special, const std::vector<std::string>& texts,
                                std::vector<Fragment>* out) const {
  out->clear();
  if (text.empty()) return;
  out->push_back({0, text.size(), -1});

  std::vector<int32_t> ranks;  // specials that occur somewhere in `text`
  for (size_t i = 0; i < text.size(); ++i) {
    int32_t node = 0;
    for (size_t j = i; j < text.size(); ++j) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<unsigned char>(text[j]);
      auto it = node_child_.find(key);
      if (it == node_child_.end()) break;
      node = it->second;
      const int32_t rank = node_rank_[node];
      if (rank < 0) continue;
      if (!parse_special && parse_only_[rank]) continue;
      ranks.push_back(rank);
    }
  }
  if (ranks.empty()) return;
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());

  std::vector<Fragment> next;
  for (int32_t rank : ranks) {
    const int32_t id = specials_[rank];
    const std::string_view special = texts[id];
    next.clear();
    for (const Fragment& f : *out) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      const size_t end = f.offset + f.length;
      const std::string_view window = text.substr(0, end);
      size_t pos = f.offset;
      while (pos < end) {
        const size_t match = window.find(special, pos);
        if (match == std::string_view::npos) break;
        if (match > pos) next.push_back({pos, match - pos, -1});
        next.push_back({match, special.size(), id});
        pos = match + special.size();
      }
      if (pos < end) next.push_back({pos, end - pos, -1});
    }
    out->swap(next);
  }
}

}  // namespace dspark::tokenizer
