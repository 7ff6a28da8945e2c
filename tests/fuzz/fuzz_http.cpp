// libFuzzer target: the HTTP/1.1 request parser of dspark serve (serve/http_parse.h) on arbitrary
// bytes, with small limits so the limit paths are reached. It must never crash; an error carries
// one of the documented statuses and a message; a parsed request consumed no more than the input,
// its body is exactly the bytes after the head, and parsing every following request of the same
// buffer (pipelining) terminates.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "core/status.h"
#include "serve/http_parse.h"

using namespace dspark::serve;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view buf(reinterpret_cast<const char*>(data), size);
  HttpLimits lim;
  lim.max_head_bytes = 512;
  lim.max_headers = 8;
  lim.max_body_bytes = 256;
  for (int i = 0; i < 64 && !buf.empty(); ++i) {
    HttpRequest r;
    const ParseResult p = parse_http_request(buf, lim, &r);
    if (p.state == ParseState::kIncomplete) break;
    if (p.state == ParseState::kError) {
      const int s = p.status;
      DSPARK_CHECK(s == 400 || s == 411 || s == 413 || s == 414 || s == 417 || s == 431 || s == 505);
      DSPARK_CHECK(!p.message.empty());
      break;
    }
    DSPARK_CHECK(p.consumed > 0 && p.consumed <= buf.size());
    DSPARK_CHECK(r.body.size() <= lim.max_body_bytes);
    DSPARK_CHECK(buf.substr(p.consumed - r.body.size(), r.body.size()) == r.body);
    DSPARK_CHECK(!r.method.empty() && !r.path.empty() && (r.minor == 0 || r.minor == 1));
    DSPARK_CHECK(r.headers.size() <= lim.max_headers);
    buf.remove_prefix(p.consumed);
  }
  return 0;
}
