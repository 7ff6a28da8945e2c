#include "serve/http_listener.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

namespace dspark::serve {

namespace {

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;  // reset, closed, or the send timeout (a client that stopped reading)
    }
    data.remove_prefix((size_t)n);
  }
  return true;
}

std::string status_line(int minor, int status) {
  return "HTTP/1." + std::to_string(minor) + " " + std::to_string(status) + " " + http_reason(status) + "\r\n";
}

std::string hex(size_t n) {
  char b[20];
  std::snprintf(b, sizeof b, "%zx", n);
  return b;
}

}  // namespace

bool HttpConn::client_gone(bool headers_sent) {
  if (gone_) return true;
  pollfd p{fd_, POLLRDHUP, 0};  // POLLERR / POLLHUP are always reported
  if (::poll(&p, 1, 0) > 0) {
    if (p.revents & (POLLERR | POLLHUP | POLLNVAL)) return gone_ = true;
    if (p.revents & POLLRDHUP) eof_ = true;
  }
  if (eof_ && !headers_sent) {
    if (minor_ == 0) return gone_ = true;  // no interim responses in HTTP/1.0: an EOF is a goodbye
    if (!probed_) {
      // A client that only half-closed reads this and waits for the final response; one that
      // closed answers with a reset, which the next call sees as POLLERR / POLLHUP.
      probed_ = true;
      static constexpr std::string_view kProbe = "HTTP/1.1 102 Processing\r\n\r\n";
      if (::send(fd_, kProbe.data(), kProbe.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) gone_ = true;
    }
  }
  return gone_;
}

HttpListener::HttpListener(HttpListenerOptions opt, Handler handler, ErrorBody error_body, Logger logger)
    : opt_(std::move(opt)), handler_(std::move(handler)), error_body_(std::move(error_body)), logger_(std::move(logger)) {}

HttpListener::~HttpListener() {
  stop();
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

Status HttpListener::bind() {
  const std::string where = opt_.host + ":" + std::to_string(opt_.port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* res = nullptr;
  if (int rc = ::getaddrinfo(opt_.host.c_str(), std::to_string(opt_.port).c_str(), &hints, &res); rc != 0)
    return Status::error("cannot bind " + where + ": " + ::gai_strerror(rc));
  std::string why = "no address";
  for (addrinfo* a = res; a; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 128) == 0) {
      listen_fd_ = fd;
      break;
    }
    why = std::strerror(errno);
    ::close(fd);
  }
  ::freeaddrinfo(res);
  if (listen_fd_ < 0) return Status::error("cannot bind " + where + " (" + why + ")");
  sockaddr_storage ss{};
  socklen_t len = sizeof ss;
  ::getsockname(listen_fd_, (sockaddr*)&ss, &len);
  port_ = ss.ss_family == AF_INET6 ? ntohs(((sockaddr_in6*)&ss)->sin6_port) : ntohs(((sockaddr_in*)&ss)->sin_port);
  if (::pipe2(wake_, O_CLOEXEC) != 0) return Status::error(std::string("pipe: ") + std::strerror(errno));
  return Status::ok();
}

void HttpListener::stop() {
  if (stopping_.exchange(true)) return;
  if (wake_[1] >= 0) {
    const char b = 1;
    (void)!::write(wake_[1], &b, 1);
  }
}

void HttpListener::run() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) {
      if (errno == EINTR) continue;
      break;
    }
    if (stopping_ || (p[1].revents & POLLIN)) break;
    if (!(p[0].revents & POLLIN)) continue;
    const int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    timeval tv{opt_.io_timeout_s, 0};
    ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::unique_lock lk(mu_);
    if (active_ >= opt_.max_connections) {
      lk.unlock();
      const std::string body = error_body_(503, "too many open connections; retry later");
      send_all(fd, status_line(1, 503) + "Content-Type: application/json\r\nContent-Length: " +
                       std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body);
      logger_(nullptr, 503, body.size());
      ::close(fd);
      continue;
    }
    ++active_;
    open_.insert(fd);
    lk.unlock();
    std::thread([this, fd] { serve_connection(fd); }).detach();
  }
  // Cut every connection still open (idle keep-alives; streams were given their drain time by the
  // caller) and wait for their threads.
  std::unique_lock lk(mu_);
  for (int fd : open_) ::shutdown(fd, SHUT_RDWR);
  cv_.wait(lk, [&] { return active_ == 0; });
}

void HttpListener::leave(int fd) {
  ::close(fd);
  std::lock_guard lk(mu_);
  open_.erase(fd);
  --active_;
  cv_.notify_all();
}

void HttpListener::serve_connection(int fd) {
  std::string buf;
  bool eof = false, sent_continue = false;
  HttpConn conn(fd, 1);
  while (!stopping_) {
    HttpRequest req;
    const ParseResult r = parse_http_request(buf, opt_.limits, &req);
    if (r.state == ParseState::kIncomplete) {
      if (r.head_done && req.expect_continue && !sent_continue) {
        if (head_check_) {
          if (std::optional<HttpReply> early = head_check_(req)) {
            size_t bytes = 0;
            write_reply(fd, conn, &req, *early, false, &bytes);
            logger_(&req, early->status, bytes);
            break;
          }
        }
        sent_continue = true;
        if (!send_all(fd, "HTTP/1.1 100 Continue\r\n\r\n")) break;
      }
      if (eof) break;  // the client stopped sending: nothing (more) to answer
      pollfd p{fd, POLLIN, 0};
      const int n = ::poll(&p, 1, 1000 * (buf.empty() ? opt_.idle_timeout_s : opt_.io_timeout_s));
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        if (n == 0 && !buf.empty()) {  // a request that stopped arriving
          const std::string body = error_body_(408, "the request did not arrive in time");
          send_all(fd, status_line(1, 408) + "Content-Type: application/json\r\nContent-Length: " +
                           std::to_string(body.size()) + "\r\nRetry-After: 1\r\nConnection: close\r\n\r\n" + body);
          logger_(nullptr, 408, body.size());
        }
        break;
      }
      char tmp[16384];
      const ssize_t k = ::recv(fd, tmp, sizeof tmp, 0);
      if (k < 0) {
        if (errno == EINTR) continue;
        break;
      }
      if (k == 0) eof = true;
      else buf.append(tmp, (size_t)k);
      continue;
    }
    if (r.state == ParseState::kError) {
      HttpReply reply;
      reply.status = r.status;
      reply.body = error_body_(r.status, r.message);
      size_t bytes = 0;
      write_reply(fd, conn, nullptr, reply, false, &bytes);
      logger_(nullptr, r.status, bytes);
      break;
    }
    buf.erase(0, r.consumed);
    sent_continue = false;
    conn = HttpConn(fd, req.minor);
    conn.eof_ = eof;
    HttpReply reply = handler_(req, conn);
    eof = eof || conn.eof_;
    const bool keep = req.keep_alive && !stopping_ && !conn.gone_;
    size_t bytes = 0;
    const bool ok = !conn.gone_ && write_reply(fd, conn, &req, reply, keep, &bytes);
    logger_(&req, reply.status, bytes);
    if (!ok || !keep) break;
  }
  leave(fd);
}

bool HttpListener::write_reply(int fd, HttpConn& conn, const HttpRequest* req, HttpReply& reply, bool keep_alive,
                               size_t* body_bytes) {
  const int minor = req ? req->minor : 1;
  const bool streamed = (bool)reply.next;
  if (streamed && minor == 0) keep_alive = false;  // HTTP/1.0: the body ends with the connection
  std::string head = status_line(minor, reply.status);
  head += "Content-Type: " + reply.content_type + "\r\n";
  for (const auto& [k, v] : reply.headers) head += k + ": " + v + "\r\n";
  if (!streamed) head += "Content-Length: " + std::to_string(reply.body.size()) + "\r\n";
  else if (minor == 1) head += "Transfer-Encoding: chunked\r\n";
  if (!keep_alive) head += "Connection: close\r\n";
  else if (minor == 0) head += "Connection: keep-alive\r\n";
  head += "\r\n";
  if (!streamed) {
    *body_bytes = reply.body.size();
    if (req && req->method == "HEAD") return send_all(fd, head);
    return send_all(fd, head + reply.body);
  }
  auto finish = [&](bool complete) {
    if (reply.done) reply.done(complete);
    return complete;
  };
  if (!send_all(fd, head)) return finish(false);
  std::string piece;
  for (;;) {
    piece.clear();
    const bool more = reply.next(&piece);
    if (!piece.empty()) {
      *body_bytes += piece.size();
      const std::string framed = minor == 1 ? hex(piece.size()) + "\r\n" + piece + "\r\n" : piece;
      if (!send_all(fd, framed)) return finish(false);
    }
    if (!more) break;
    if (conn.client_gone(true)) return finish(false);
    if (conn.eof_ && !conn.probed_ && !reply.probe.empty()) {
      conn.probed_ = true;
      if (!send_all(fd, minor == 1 ? hex(reply.probe.size()) + "\r\n" + reply.probe + "\r\n" : reply.probe))
        return finish(false);
    }
  }
  if (minor == 1 && !send_all(fd, "0\r\n\r\n")) return finish(false);
  return finish(true);
}

}  // namespace dspark::serve
