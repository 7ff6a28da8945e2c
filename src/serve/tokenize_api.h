// llama-server's tokenizer routes, same shapes: POST /tokenize {"content": str, "add_special":
// bool = false, "parse_special": bool = true, "with_pieces": bool = false} -> {"tokens": [id...]}
// or, with pieces, {"tokens": [{"id": id, "piece": str}...]}; POST /detokenize {"tokens": [id...]}
// -> {"content": str}. Pure functions (JSON in, JSON out), strict like openai_api.h: wrong types,
// out-of-range ids and unknown fields are 400s naming the field.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "serve/openai_api.h"
#include "tokenizer/tokenizer.h"

namespace dspark::serve {

ApiResult<nlohmann::json> tokenize_route(std::string_view body, const tokenizer::Tokenizer& tok);
ApiResult<nlohmann::json> detokenize_route(std::string_view body, const tokenizer::Tokenizer& tok);

}  // namespace dspark::serve
