// HTTP/1.1 request parsing for `dspark serve`'s HTTP server (http_listener.h): bytes in, a request
// or a precise error status out. Boost.Beast's request parser (Boost 1.74, header-only) reads the
// message; the checks Beast leaves to its user are made here. No sockets, so the unit tests and
// the libFuzzer target (tests/fuzz/fuzz_http.cpp) drive it directly.
//
// Strict where a lenient parser would let a client desynchronise the connection: the request
// line must be METHOD SP TARGET SP HTTP/1.x with an origin-form target; header names are RFC 9110
// tokens; Content-Length is decimal digits only (a second, different Content-Length, a negative or
// oversized one is an error); bare-LF line ends and obsolete line folding are refused (Beast
// would accept the folding and wait on a bare LF); one Host, required in HTTP/1.1; request bodies
// in Transfer-Encoding are refused (411: send Content-Length), because a pipelined connection
// cannot be resynchronised after a body it does not understand.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace dspark::serve {

struct HttpLimits {
  size_t max_head_bytes = 16 * 1024;  // request line + headers; larger -> 431 (414 for the line alone)
  size_t max_headers = 100;           // more header fields -> 431
  size_t max_body_bytes = 1 << 20;    // larger Content-Length -> 413
};

struct HttpRequest {
  std::string method;   // as sent (methods are case-sensitive)
  std::string target;   // request target, e.g. /v1/models?x=1
  std::string path;     // target up to '?'
  int minor = 1;        // HTTP/1.<minor>: 0 or 1
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased, values trimmed
  std::string body;
  bool keep_alive = true;       // HTTP/1.1 unless "Connection: close"; HTTP/1.0 only with keep-alive
  bool expect_continue = false; // "Expect: 100-continue"

  // The first value of a header (name in lower case), "" if absent.
  std::string_view header(std::string_view lower_name) const;
  bool has_header(std::string_view lower_name) const;
};

enum class ParseState {
  kIncomplete,  // need more bytes (head_done tells whether the head is complete)
  kDone,        // *out is a full request; *consumed bytes of the buffer belong to it
  kError,       // status + message describe the failure; the connection must close after answering
};

struct ParseResult {
  ParseState state = ParseState::kIncomplete;
  int status = 0;            // kError: 400, 411, 413, 414, 431, 501 or 505
  std::string message;       // kError: what was wrong, naming the field
  size_t consumed = 0;       // kDone: bytes of buffer used by this request
  bool head_done = false;    // the head is complete (kIncomplete: waiting for the body)
};

// Parses the request at the start of `buf`. Call again with more bytes on kIncomplete (the parse
// restarts from the beginning; heads are small). On kIncomplete with head_done, *out holds the head
// (so a server can answer Expect: 100-continue before the body arrives).
ParseResult parse_http_request(std::string_view buf, const HttpLimits& limits, HttpRequest* out);

// The reason phrase of a status code ("OK", "Not Found", ...; "Unknown" otherwise).
const char* http_reason(int status);

}  // namespace dspark::serve
