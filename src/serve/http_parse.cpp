#include "serve/http_parse.h"

#include <algorithm>
#include <cctype>
#include <cstdint>

#include <boost/beast/http.hpp>

namespace dspark::serve {

namespace {

// Beast (Boost 1.74) has its own string_view.
std::string_view sv(boost::beast::string_view s) { return {s.data(), s.size()}; }

std::string lower(std::string_view s) {
  std::string r(s);
  for (char& c : r) c = (char)std::tolower((unsigned char)c);
  return r;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

ParseResult fail(int status, std::string message) {
  ParseResult r;
  r.state = ParseState::kError;
  r.status = status;
  r.message = std::move(message);
  return r;
}

// Does the comma-separated list `value` hold `token` (case-insensitive)?
bool list_has(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    const size_t comma = value.find(',');
    const std::string_view item = trim(value.substr(0, comma));
    if (lower(item) == token) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

}  // namespace

std::string_view HttpRequest::header(std::string_view lower_name) const {
  for (const auto& [k, v] : headers)
    if (k == lower_name) return v;
  return {};
}

bool HttpRequest::has_header(std::string_view lower_name) const {
  for (const auto& kv : headers)
    if (kv.first == lower_name) return true;
  return false;
}

namespace {

// Maps a Beast parse error to our status and message. `seen` is the request so far.
ParseResult beast_failure(const boost::beast::error_code& ec, std::string_view seen, const HttpLimits& limits) {
  namespace http = boost::beast::http;
  if (ec == http::error::header_limit) {
    if (seen.find("\r\n") == std::string_view::npos)
      return fail(414, "the request line is longer than " + std::to_string(limits.max_head_bytes) + " bytes");
    return fail(431, "the request headers are larger than " + std::to_string(limits.max_head_bytes) + " bytes");
  }
  if (ec == http::error::body_limit) return fail(413, "the request body is larger than " +
                                                          std::to_string(limits.max_body_bytes) + " bytes");
  if (ec == http::error::bad_version) {
    // HTTP/2.0 and friends are well-formed but not ours: 505; anything else is malformed.
    const std::string_view line = seen.substr(0, seen.find("\r\n"));
    const size_t sp = line.rfind(' ');
    const std::string_view v = sp == std::string_view::npos ? std::string_view() : line.substr(sp + 1);
    if (v.size() == 8 && v.substr(0, 5) == "HTTP/" && std::isdigit((unsigned char)v[5]) && v[6] == '.' &&
        std::isdigit((unsigned char)v[7]) && v[5] != '1')
      return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
    return fail(400, "malformed HTTP version");
  }
  if (ec == http::error::bad_content_length)
    return fail(400, "Content-Length: not one non-negative decimal number (or with Transfer-Encoding)");
  if (ec == http::error::bad_method) return fail(400, "malformed request method");
  if (ec == http::error::bad_target) return fail(400, "malformed request line (expected: METHOD TARGET HTTP/1.1)");
  if (ec == http::error::bad_field) return fail(400, "malformed header line");
  if (ec == http::error::bad_value) return fail(400, "control character in a header value");
  return fail(400, "malformed request: " + ec.message());
}

}  // namespace

ParseResult parse_http_request(std::string_view buf, const HttpLimits& limits, HttpRequest* out) {
  namespace http = boost::beast::http;
  // Empty lines before a request line are ignored (RFC 9112 section 2.2), e.g. a CRLF after a body.
  size_t start = 0;
  while (start + 1 < buf.size() && buf[start] == '\r' && buf[start + 1] == '\n') start += 2;
  const std::string_view rest = buf.substr(start);
  const size_t head_end = rest.find("\r\n\r\n");
  // What Beast lets through and we do not: a line ended by a bare LF (answered now, not at the
  // timeout, even while the head is incomplete) and obsolete line folding (a line starting with
  // SP or HT), both ways to make two parsers read one head differently.
  const std::string_view seen = rest.substr(0, head_end == std::string_view::npos ? rest.size() : head_end + 2);
  for (size_t i = seen.find('\n'); i != std::string_view::npos; i = seen.find('\n', i + 1)) {
    if (i == 0 || seen[i - 1] != '\r') return fail(400, "a header line ends in a bare LF (CRLF required)");
    if (i + 1 < seen.size() && (seen[i + 1] == ' ' || seen[i + 1] == '\t'))
      return fail(400, "obsolete header line folding is not accepted");
  }

  http::request_parser<http::string_body> parser;
  parser.header_limit((std::uint32_t)std::min<size_t>(limits.max_head_bytes, UINT32_MAX));
  parser.body_limit(limits.max_body_bytes);
  boost::beast::error_code ec;
  size_t used = 0;
  // Feeds rest[used, end) until `done()` or Beast wants more than there is; false on an error.
  auto feed = [&](size_t end, auto done) {
    while (!done()) {
      const size_t n = parser.put(boost::asio::buffer(rest.data() + used, end - used), ec);
      used += n;
      if (ec == http::error::need_more) ec = {};
      if (ec) return false;
      if (n == 0 || used == end) break;
    }
    return true;
  };
  // The head first (eager off: Beast stops after it), the body only once all of it has arrived, so
  // a body trickling in is not parsed again with every piece.
  parser.eager(false);
  if (!feed(rest.size(), [&] { return parser.is_header_done(); })) return beast_failure(ec, rest, limits);
  if (!parser.is_header_done()) {
    if (rest.size() > limits.max_head_bytes) return beast_failure(http::error::header_limit, rest, limits);
    return {};  // kIncomplete
  }

  // The head: our own checks on what Beast accepted.
  const auto& msg = parser.get();  // the head; its body is read below
  *out = HttpRequest{};
  if (msg.version() / 10 != 1) return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  out->method = std::string(sv(msg.method_string()));
  out->target = std::string(sv(msg.target()));
  if (out->target.empty() || (out->target[0] != '/' && out->target != "*"))
    return fail(400, "the request target must start with '/'");
  out->path = out->target.substr(0, out->target.find('?'));
  out->minor = msg.version() % 10 == 0 ? 0 : 1;
  for (const auto& f : msg) {
    if (out->headers.size() >= limits.max_headers)
      return fail(431, "more than " + std::to_string(limits.max_headers) + " header fields");
    out->headers.emplace_back(lower(sv(f.name_string())), std::string(trim(sv(f.value()))));
  }
  if (out->minor == 1 && !out->has_header("host")) return fail(400, "Host: missing (required in HTTP/1.1)");
  if (std::count_if(out->headers.begin(), out->headers.end(), [](const auto& h) { return h.first == "host"; }) > 1)
    return fail(400, "Host: given more than once");
  if (out->has_header("transfer-encoding"))
    return fail(411, "request bodies must be sent with Content-Length (Transfer-Encoding is not supported)");
  const std::string_view conn = out->header("connection");
  out->keep_alive = out->minor == 1 ? !list_has(conn, "close") : list_has(conn, "keep-alive");
  if (out->has_header("expect")) {
    if (lower(out->header("expect")) != "100-continue") return fail(417, "Expect: only 100-continue is supported");
    out->expect_continue = out->minor == 1;
  }

  ParseResult r;
  r.head_done = true;
  const uint64_t length = parser.content_length().value_or(0);  // <= max_body_bytes: Beast checked
  if (rest.size() - used < length) return r;  // kIncomplete: waiting for the body
  parser.eager(true);
  if (!feed(used + (size_t)length, [&] { return parser.is_done(); })) return beast_failure(ec, rest, limits);
  if (!parser.is_done()) return fail(400, "malformed request body");
  out->body = std::move(parser.get().body());
  r.state = ParseState::kDone;
  r.consumed = start + used;
  return r;
}

const char* http_reason(int status) {
  switch (status) {
    case 100: return "Continue";
    case 102: return "Processing";
    case 200: return "OK";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 404: return "Not Found";
    case 405: return "Method Not Allowed";
    case 408: return "Request Timeout";
    case 411: return "Length Required";
    case 413: return "Content Too Large";
    case 414: return "URI Too Long";
    case 415: return "Unsupported Media Type";
    case 417: return "Expectation Failed";
    case 421: return "Misdirected Request";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 501: return "Not Implemented";
    case 503: return "Service Unavailable";
    case 505: return "HTTP Version Not Supported";
    default: return "Unknown";
  }
}

}  // namespace dspark::serve
