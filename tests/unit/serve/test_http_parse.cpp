// The HTTP/1.1 request parser of dspark serve (serve/http_parse.h): framing, limits, and the
// error status of every malformed request.
#include <gtest/gtest.h>

#include <string>

#include "serve/http_parse.h"

namespace dspark::serve {
namespace {

ParseResult parse(const std::string& s, HttpRequest* r, HttpLimits lim = {}) { return parse_http_request(s, lim, r); }

int error_status(const std::string& s, HttpLimits lim = {}) {
  HttpRequest r;
  const ParseResult p = parse(s, &r, lim);
  EXPECT_EQ(p.state, ParseState::kError) << s.substr(0, 80);
  EXPECT_FALSE(p.message.empty());
  return p.status;
}

TEST(HttpParse, RequestWithBodyAndPipelinedNext) {
  const std::string one = "POST /v1/completions?x=1 HTTP/1.1\r\nHost: a\r\nContent-Type:  application/json \r\n"
                          "Content-Length: 2\r\n\r\n{}";
  const std::string two = "GET /health HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n";
  HttpRequest r;
  ParseResult p = parse(one + two, &r);
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_EQ(p.consumed, one.size());
  EXPECT_EQ(r.method, "POST");
  EXPECT_EQ(r.path, "/v1/completions");
  EXPECT_EQ(r.target, "/v1/completions?x=1");
  EXPECT_EQ(r.header("content-type"), "application/json");
  EXPECT_EQ(r.body, "{}");
  EXPECT_TRUE(r.keep_alive);
  p = parse(two, &r);
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_EQ(r.path, "/health");
  EXPECT_FALSE(r.keep_alive);
}

TEST(HttpParse, IncompleteHeadAndBody) {
  HttpRequest r;
  const std::string full = "POST / HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\nhello";
  for (size_t n = 0; n < full.size(); ++n) {
    const ParseResult p = parse(full.substr(0, n), &r);
    ASSERT_EQ(p.state, ParseState::kIncomplete) << n;
    EXPECT_EQ(p.head_done, n >= full.size() - 5) << n;
    if (p.head_done) {
      EXPECT_TRUE(r.expect_continue);
    }
  }
  EXPECT_EQ(parse(full, &r).state, ParseState::kDone);
  EXPECT_EQ(r.body, "hello");
}

TEST(HttpParse, LeadingEmptyLinesAndHttp10) {
  HttpRequest r;
  ParseResult p = parse("\r\n\r\nGET / HTTP/1.0\r\n\r\n", &r);
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_EQ(r.minor, 0);
  EXPECT_FALSE(r.keep_alive);  // HTTP/1.0 closes unless asked
  p = parse("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", &r);
  ASSERT_EQ(p.state, ParseState::kDone);
  EXPECT_TRUE(r.keep_alive);
}

TEST(HttpParse, ContentLengthMustBeOneNonNegativeDecimal) {
  for (const char* v : {"-1", "+5", "1e3", "0x10", " ", "5 5", "99999999999999999999"}) {
    const std::string req = std::string("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: ") + v + "\r\n\r\n";
    EXPECT_EQ(error_status(req), 400) << v;
  }
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nab"), 400);
  HttpRequest r;
  EXPECT_EQ(parse("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\na", &r).state,
            ParseState::kDone);
}

TEST(HttpParse, Limits) {
  HttpLimits lim;
  lim.max_head_bytes = 256;
  lim.max_headers = 4;
  lim.max_body_bytes = 10;
  EXPECT_EQ(error_status("GET /" + std::string(300, 'a'), lim), 414);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(300, 'a'), lim), 431);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\nX: " + std::string(300, 'a') + "\r\n\r\n", lim), 431);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 1\r\nC: 1\r\nD: 1\r\n\r\n", lim), 431);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 11\r\n\r\n", lim), 413);
}

TEST(HttpParse, MalformedRequestsGetTheirStatus) {
  EXPECT_EQ(error_status("GET /\r\n\r\n"), 400);                       // no version
  EXPECT_EQ(error_status("GET  / HTTP/1.1\r\n\r\n"), 400);             // double space
  EXPECT_EQ(error_status("GET x HTTP/1.1\r\nHost: a\r\n\r\n"), 400);   // target not absolute path
  EXPECT_EQ(error_status("G(T / HTTP/1.1\r\nHost: a\r\n\r\n"), 400);  // method not a token
  EXPECT_EQ(error_status("GET / HTTP/2.0\r\nHost: a\r\n\r\n"), 505);
  EXPECT_EQ(error_status("GET / HTTQ/1.1\r\nHost: a\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\n\r\n"), 400);              // HTTP/1.1 without Host
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\nBad Name: 1\r\n\r\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n"), 400);
  EXPECT_EQ(error_status(std::string("GET / HTTP/1.1\r\nHost: a\r\nX: a\0b\r\n\r\n", 36)), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), 411);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n"), 400);
  EXPECT_EQ(error_status("POST / HTTP/1.1\r\nHost: a\r\nExpect: something\r\n\r\n"), 417);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), 400);  // two Hosts
  // Bare LF line ends: answered at once, whole or still incomplete (not left to the timeout).
  EXPECT_EQ(error_status("GET / HTTP/1.1\nHost: a\n\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\n"), 400);
  EXPECT_EQ(error_status("GET / HTTP/1.1\r\nHost: a\n"), 400);
}

TEST(HttpParse, ReasonPhrases) {
  EXPECT_STREQ(http_reason(431), "Request Header Fields Too Large");
  EXPECT_STREQ(http_reason(200), "OK");
  EXPECT_STREQ(http_reason(299), "Unknown");
}

}  // namespace
}  // namespace dspark::serve
