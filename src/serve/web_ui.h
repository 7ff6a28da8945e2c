// The chat page served at GET / : one static HTML file with inline JS (no build step). It streams
// /v1/chat/completions and shows each answer's tokens/s, tau and acceptance from the final chunk.
#pragma once

#include <string_view>

namespace dspark::serve {

extern const std::string_view kWebUiHtml;

}  // namespace dspark::serve
