#include "serve/http_parse.h"

#include <algorithm>

#include <cctype>

namespace dspark::serve {

namespace {

// RFC 9110 tchar.
bool is_tchar(char c) {
  if (std::isalnum((unsigned char)c)) return true;
  switch (c) {
    case '!': case '#': case '$': case '%': case '&': case '\'': case '*': case '+': case '-': case '.':
    case '^': case '_': case '`': case '|': case '~':
      return true;
    default:
      return false;
  }
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  for (char c : s)
    if (!is_tchar(c)) return false;
  return true;
}

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

ParseResult parse_http_request(std::string_view buf, const HttpLimits& limits, HttpRequest* out) {
  // Empty lines before a request line are ignored (RFC 9112 section 2.2), e.g. a CRLF after a body.
  size_t start = 0;
  while (start + 1 < buf.size() && buf[start] == '\r' && buf[start + 1] == '\n') start += 2;
  const std::string_view rest = buf.substr(start);
  const size_t head_end = rest.find("\r\n\r\n");
  // A line ended by a bare LF (no CR) never completes a head: answer it now instead of at the timeout.
  const std::string_view seen = rest.substr(0, head_end == std::string_view::npos ? rest.size() : head_end + 2);
  for (size_t i = seen.find('\n'); i != std::string_view::npos; i = seen.find('\n', i + 1))
    if (i == 0 || seen[i - 1] != '\r') return fail(400, "a header line ends in a bare LF (CRLF required)");
  if (head_end == std::string_view::npos) {
    if (rest.size() > limits.max_head_bytes) {
      if (rest.find("\r\n") == std::string_view::npos)
        return fail(414, "the request line is longer than " + std::to_string(limits.max_head_bytes) + " bytes");
      return fail(431, "the request headers are larger than " + std::to_string(limits.max_head_bytes) + " bytes");
    }
    return {};
  }
  if (head_end + 4 > limits.max_head_bytes)
    return fail(431, "the request headers are larger than " + std::to_string(limits.max_head_bytes) + " bytes");

  *out = HttpRequest{};
  std::string_view head = rest.substr(0, head_end + 2);  // every line ends in CRLF
  // Request line: METHOD SP TARGET SP HTTP/1.x
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  head.remove_prefix(eol + 2);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos)
    return fail(400, "malformed request line (expected: METHOD TARGET HTTP/1.1)");
  const std::string_view method = line.substr(0, sp1), target = line.substr(sp1 + 1, sp2 - sp1 - 1),
                         version = line.substr(sp2 + 1);
  if (!is_token(method)) return fail(400, "malformed request method");
  if (target.empty() || (target[0] != '/' && target != "*")) return fail(400, "the request target must start with '/'");
  for (char c : target)
    if ((unsigned char)c <= 0x20 || (unsigned char)c >= 0x7f) return fail(400, "invalid character in the request target");
  if (version.size() != 8 || version.substr(0, 5) != "HTTP/" || !std::isdigit((unsigned char)version[5]) ||
      version[6] != '.' || !std::isdigit((unsigned char)version[7]))
    return fail(400, "malformed HTTP version '" + std::string(version.substr(0, 16)) + "'");
  if (version[5] != '1') return fail(505, "only HTTP/1.0 and HTTP/1.1 are supported");
  out->method = std::string(method);
  out->target = std::string(target);
  out->path = out->target.substr(0, out->target.find('?'));
  out->minor = version[7] == '0' ? 0 : 1;

  // Header fields.
  bool have_length = false;
  uint64_t length = 0;
  while (!head.empty()) {
    const size_t e = head.find("\r\n");
    const std::string_view field = head.substr(0, e);
    head.remove_prefix(e + 2);
    if (field.empty()) break;
    if (field[0] == ' ' || field[0] == '\t') return fail(400, "obsolete header line folding is not accepted");
    const size_t colon = field.find(':');
    if (colon == std::string_view::npos) return fail(400, "malformed header line (no ':')");
    const std::string_view name = field.substr(0, colon);
    if (!is_token(name)) return fail(400, "malformed header name '" + std::string(name.substr(0, 64)) + "'");
    const std::string_view value = trim(field.substr(colon + 1));
    for (char c : value)
      if (((unsigned char)c < 0x20 && c != '\t') || c == 0x7f)
        return fail(400, "control character in header '" + std::string(name.substr(0, 64)) + "'");
    if (out->headers.size() >= limits.max_headers)
      return fail(431, "more than " + std::to_string(limits.max_headers) + " header fields");
    out->headers.emplace_back(lower(name), std::string(value));
    const std::string& key = out->headers.back().first;
    if (key == "content-length") {
      if (value.empty() || value.size() > 19) return fail(400, "Content-Length: invalid value");
      uint64_t v = 0;
      for (char c : value) {
        if (!std::isdigit((unsigned char)c)) return fail(400, "Content-Length: '" + std::string(value.substr(0, 32)) +
                                                                 "' is not a non-negative decimal number");
        v = v * 10 + (uint64_t)(c - '0');
      }
      if (have_length && v != length) return fail(400, "Content-Length: two different values");
      have_length = true;
      length = v;
    }
  }
  if (out->minor == 1 && !out->has_header("host")) return fail(400, "Host: missing (required in HTTP/1.1)");
  if (std::count_if(out->headers.begin(), out->headers.end(), [](const auto& h) { return h.first == "host"; }) > 1)
    return fail(400, "Host: given more than once");
  if (out->has_header("transfer-encoding")) {
    if (have_length) return fail(400, "Transfer-Encoding and Content-Length together");
    return fail(411, "request bodies must be sent with Content-Length (Transfer-Encoding is not supported)");
  }
  const std::string_view conn = out->header("connection");
  out->keep_alive = out->minor == 1 ? !list_has(conn, "close") : list_has(conn, "keep-alive");
  if (out->has_header("expect")) {
    if (lower(out->header("expect")) != "100-continue")
      return fail(417, "Expect: only 100-continue is supported");
    out->expect_continue = out->minor == 1;
  }
  if (length > limits.max_body_bytes)
    return fail(413, "the request body (" + std::to_string(length) + " bytes) is larger than " +
                         std::to_string(limits.max_body_bytes) + " bytes");

  ParseResult r;
  r.head_done = true;
  const size_t body_at = start + head_end + 4;
  if (buf.size() - body_at < length) return r;  // kIncomplete: waiting for the body
  out->body = std::string(buf.substr(body_at, (size_t)length));
  r.state = ParseState::kDone;
  r.consumed = body_at + (size_t)length;
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
