#include <curl/curl.h>
#include <fmt/format.h>
#include <strings.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>

#include <harvest/common/strings.hpp>
#include <harvest/sqs/http_transport.hpp>

namespace harvest::sqs {
namespace {

// curl_global_init is not thread-safe in every libcurl build; call it exactly
// once, before the first easy handle, and never clean up (handles may live
// until process exit in static clients).
void global_init_once() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// At most this many idle handles (each with its live connections) are kept;
// more concurrent callers than this still work, their handles are freed.
constexpr size_t kMaxIdleHandles = 8;

size_t write_body(char* data, size_t size, size_t nmemb, void* user) {
  static_cast<std::string*>(user)->append(data, size * nmemb);
  return size * nmemb;
}

size_t write_header(char* data, size_t size, size_t nmemb, void* user) {
  auto* headers = static_cast<HttpHeaders*>(user);
  std::string_view line(data, size * nmemb);
  // A new status line (after a redirect or a 100 Continue) starts a new set.
  if (line.starts_with("HTTP/")) {
    headers->clear();
    return size * nmemb;
  }
  auto colon = line.find(':');
  if (colon == std::string_view::npos) return size * nmemb;
  std::string name = ascii_lower(line.substr(0, colon));
  std::string_view value = line.substr(colon + 1);
  while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.remove_prefix(1);
  while (!value.empty() && (value.back() == '\r' || value.back() == '\n' || value.back() == ' '))
    value.remove_suffix(1);
  headers->emplace_back(std::move(name), std::string(value));
  return size * nmemb;
}

Error transport_error(CURLcode code, const HttpRequest& request, const char* detail) {
  std::string what = fmt::format("{} {}: {}{}{}", request.method, request.url,
                                 curl_easy_strerror(code), *detail ? ": " : "", detail);
  switch (code) {
    case CURLE_URL_MALFORMAT:
    case CURLE_UNSUPPORTED_PROTOCOL:
      return Error::config(std::move(what));
    case CURLE_BAD_FUNCTION_ARGUMENT:
    case CURLE_OUT_OF_MEMORY:
      return Error::internal(std::move(what));
    // The endpoint's certificate is not trusted (an unknown CA, expired, the
    // wrong name) or the CA bundle cannot be read: retrying does not heal it.
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_ISSUER_ERROR:
      return Error::config(what + " (check the endpoint's certificate and AWS_CA_BUNDLE)");
    default:
      // Refused, reset, DNS, TLS handshake, timeouts: the endpoint may answer
      // on a later attempt, so the caller retries rather than giving up.
      return Error::transient_error(std::move(what));
  }
}

}  // namespace

struct HttpTransport::Handle {
  CURL* curl = nullptr;
  Handle() : curl(curl_easy_init()) {}
  ~Handle() {
    if (curl) curl_easy_cleanup(curl);
  }
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;
};

std::string HttpResponse::header(std::string_view name) const {
  for (const auto& [k, v] : headers)
    if (k == name) return v;
  return {};
}

HttpTransport::HttpTransport() {
  global_init_once();
}

HttpTransport::~HttpTransport() = default;

std::unique_ptr<HttpTransport::Handle> HttpTransport::acquire() {
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      auto h = std::move(idle_.back());
      idle_.pop_back();
      return h;
    }
  }
  return std::make_unique<Handle>();
}

void HttpTransport::release(std::unique_ptr<Handle> handle) {
  std::lock_guard lock(mu_);
  if (idle_.size() < kMaxIdleHandles) idle_.push_back(std::move(handle));
}

Result<HttpResponse> HttpTransport::perform(const HttpRequest& request) {
  auto handle = acquire();
  CURL* curl = handle->curl;
  if (!curl) return fail(Error::internal("curl_easy_init failed"));

  HttpResponse response;
  char error_buffer[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, error_buffer);
  curl_easy_setopt(curl, CURLOPT_URL, request.url.c_str());
  // Signals are not safe in a multi-threaded process (libcurl's DNS timeout
  // uses SIGALRM otherwise).
  curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, request.connect_timeout.count())));
  curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS,
                   static_cast<long>(std::max<int64_t>(1, request.timeout.count())));
  curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
  // AWS_CA_BUNDLE (as the AWS SDKs and CLI read it): the CA certificates an
  // HTTPS endpoint is verified against, instead of the system's.
  if (const char* ca = std::getenv("AWS_CA_BUNDLE"); ca && *ca) {
    curl_easy_setopt(curl, CURLOPT_CAINFO, ca);
  }
  if (request.bypass_proxy) curl_easy_setopt(curl, CURLOPT_NOPROXY, "*");
  curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, write_body);
  curl_easy_setopt(curl, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(curl, CURLOPT_HEADERFUNCTION, write_header);
  curl_easy_setopt(curl, CURLOPT_HEADERDATA, &response.headers);

  if (request.method == "POST" || request.method == "PUT") {
    if (request.method == "PUT") curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, "PUT");
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, request.body.data());
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE,
                     static_cast<curl_off_t>(request.body.size()));
  } else if (request.method != "GET") {
    curl_easy_setopt(curl, CURLOPT_CUSTOMREQUEST, request.method.c_str());
  }

  curl_slist* headers = nullptr;
  for (const auto& [name, value] : request.headers)
    headers = curl_slist_append(headers, fmt::format("{}: {}", name, value).c_str());
  // libcurl sends "Expect: 100-continue" for bodies over 1 KiB and then waits
  // up to a second for the interim answer; SQS never needs it.
  headers = curl_slist_append(headers, "Expect:");
  // libcurl would otherwise add its default form content type to a POST.
  bool has_content_type = std::any_of(request.headers.begin(), request.headers.end(), [](auto& h) {
    return h.first.size() == 12 && strncasecmp(h.first.c_str(), "content-type", 12) == 0;
  });
  if (!has_content_type) headers = curl_slist_append(headers, "Content-Type:");
  curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);

  CURLcode rc = curl_easy_perform(curl);
  if (rc == CURLE_OK) curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &response.status);
  // Clear the options before pooling the handle: they point at this call's
  // stack (error buffer, response) and header list. Reset keeps the
  // handle's open connections, which is the point of pooling it; after a
  // failed transfer libcurl has already closed a broken connection itself.
  curl_easy_reset(curl);
  curl_slist_free_all(headers);
  release(std::move(handle));
  if (rc != CURLE_OK) return fail(transport_error(rc, request, error_buffer));
  return response;
}

std::string url_encode(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (unsigned char c : s) {
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved) {
      out.push_back(static_cast<char>(c));
    } else {
      out.push_back('%');
      out.push_back(kHex[c >> 4]);
      out.push_back(kHex[c & 0xF]);
    }
  }
  return out;
}

}  // namespace harvest::sqs
