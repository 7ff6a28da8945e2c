#include "serve/tokenize_api.h"

namespace dspark::serve {

using nlohmann::json;

namespace {

// The body as a JSON object, or the error openai_api gives for the same fault.
ApiResult<json> object_body(std::string_view body) {
  json j;
  try {
    j = json::parse(body.begin(), body.end());
  } catch (const json::exception& e) {
    return bad_request(std::string("invalid JSON body: ") + e.what(), "", "invalid_json");
  }
  if (!j.is_object()) return bad_request("the body must be a JSON object", "", "invalid_type");
  return j;
}

}  // namespace

ApiResult<json> tokenize_route(std::string_view body, const tokenizer::Tokenizer& tok) {
  auto parsed = object_body(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  bool add_special = false, parse_special = true, with_pieces = false;
  std::string content;
  bool have_content = false;
  for (const auto& [k, v] : j.items()) {
    if (k == "content") {
      if (!v.is_string()) return bad_request("content: must be a string", "content", "invalid_type");
      content = v.get<std::string>();
      have_content = true;
    } else if (k == "add_special" || k == "parse_special" || k == "with_pieces") {
      if (!v.is_boolean()) return bad_request(k + ": must be true or false", k, "invalid_type");
      (k == "add_special" ? add_special : k == "parse_special" ? parse_special : with_pieces) = v.get<bool>();
    } else {
      return bad_request("unknown field '" + k.substr(0, 64) + "' (content, add_special, parse_special, with_pieces)",
                         k.substr(0, 64), "unknown_field");
    }
  }
  if (!have_content) return bad_request("content: missing", "content", "missing_field");
  const std::vector<int32_t> ids = tok.encode(content, add_special, parse_special);
  json out = json::array();
  for (int32_t id : ids) {
    if (with_pieces) out.push_back({{"id", id}, {"piece", tok.token_to_piece(id, /*render_special=*/true)}});
    else out.push_back(id);
  }
  return json{{"tokens", out}};
}

ApiResult<json> detokenize_route(std::string_view body, const tokenizer::Tokenizer& tok) {
  auto parsed = object_body(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  const json& j = std::get<json>(parsed);
  for (const auto& [k, v] : j.items())
    if (k != "tokens") return bad_request("unknown field '" + k.substr(0, 64) + "' (tokens)", k.substr(0, 64), "unknown_field");
  if (!j.contains("tokens")) return bad_request("tokens: missing", "tokens", "missing_field");
  const json& t = j["tokens"];
  if (!t.is_array()) return bad_request("tokens: must be an array of token ids", "tokens", "invalid_type");
  std::vector<int32_t> ids;
  ids.reserve(t.size());
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string where = "tokens[" + std::to_string(i) + "]";
    if (!t[i].is_number_integer()) return bad_request(where + ": must be an integer", where, "invalid_type");
    const int64_t id = t[i].get<int64_t>();
    if (id < 0 || id >= tok.n_vocab())
      return bad_request(where + ": " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(tok.n_vocab()) + ")",
                         where, "invalid_value");
    ids.push_back((int32_t)id);
  }
  return json{{"content", tok.decode(ids, /*render_special=*/true)}};
}

}  // namespace dspark::serve
