#include <fmt/format.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include <algorithm>
#include <map>

#include <harvest/common/strings.hpp>
#include <harvest/sqs/sigv4.hpp>

namespace harvest::sqs {
namespace {

std::string to_hex(const unsigned char* data, size_t n) {
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out(n * 2, '0');
  for (size_t i = 0; i < n; ++i) {
    out[2 * i] = kHex[data[i] >> 4];
    out[2 * i + 1] = kHex[data[i] & 0xF];
  }
  return out;
}

// SigV4 canonical header value: surrounding whitespace trimmed and runs of
// spaces inside collapsed to one (the "get-header-value-trim" vector).
std::string canonical_value(std::string_view v) {
  std::string out;
  bool space = false;
  for (char c : v) {
    if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
      space = !out.empty();
      continue;
    }
    if (space) out.push_back(' ');
    space = false;
    out.push_back(c);
  }
  return out;
}

// Non-S3 services sign the normalised path: dot segments resolved, empty
// segments dropped, each segment percent-encoded once from its raw form.
std::string canonical_path(std::string_view path) {
  std::vector<std::string_view> segments;
  size_t pos = 0;
  while (pos <= path.size()) {
    size_t next = path.find('/', pos);
    if (next == std::string_view::npos) next = path.size();
    std::string_view seg = path.substr(pos, next - pos);
    if (seg == "..") {
      if (!segments.empty()) segments.pop_back();
    } else if (!seg.empty() && seg != ".") {
      segments.push_back(seg);
    }
    pos = next + 1;
  }
  std::string out;
  for (auto seg : segments) out += "/" + url_encode(seg);
  bool trailing = path.size() > 1 && path.back() == '/' && !segments.empty();
  if (out.empty() || trailing) out += "/";
  return out;
}

std::string canonical_query(const std::vector<std::pair<std::string, std::string>>& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [k, v] : query) encoded.emplace_back(url_encode(k), url_encode(v));
  std::sort(encoded.begin(), encoded.end());
  std::string out;
  for (const auto& [k, v] : encoded) {
    if (!out.empty()) out += '&';
    out += k + "=" + v;
  }
  return out;
}

bool has_header(const HttpHeaders& headers, std::string_view lower_name) {
  return std::any_of(headers.begin(), headers.end(),
                     [&](const auto& h) { return ascii_lower(h.first) == lower_name; });
}

}  // namespace

std::string hex_sha256(std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  EVP_Digest(data.data(), data.size(), digest, &n, EVP_sha256(), nullptr);
  return to_hex(digest, n);
}

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int n = 0;
  HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
       reinterpret_cast<const unsigned char*>(data.data()), data.size(), mac, &n);
  return std::string(reinterpret_cast<const char*>(mac), n);
}

std::string amz_date(std::chrono::system_clock::time_point when) {
  auto secs = std::chrono::floor<std::chrono::seconds>(when);
  auto day = std::chrono::floor<std::chrono::days>(secs);
  std::chrono::year_month_day ymd{day};
  std::chrono::hh_mm_ss hms{secs - day};
  return fmt::format("{:04}{:02}{:02}T{:02}{:02}{:02}Z", static_cast<int>(ymd.year()),
                     static_cast<unsigned>(ymd.month()), static_cast<unsigned>(ymd.day()),
                     hms.hours().count(), hms.minutes().count(), hms.seconds().count());
}

SigV4Signature sign_v4(const SigV4Request& request, const AwsCredentials& credentials,
                       std::string_view region, std::string_view service,
                       std::chrono::system_clock::time_point when) {
  const std::string timestamp = amz_date(when);
  const std::string date = timestamp.substr(0, 8);

  SigV4Signature out;
  out.headers = request.headers;
  if (!has_header(out.headers, "host")) out.headers.emplace_back("Host", request.host);
  if (!has_header(out.headers, "x-amz-date")) out.headers.emplace_back("X-Amz-Date", timestamp);
  if (!credentials.session_token.empty() && !has_header(out.headers, "x-amz-security-token"))
    out.headers.emplace_back("X-Amz-Security-Token", credentials.session_token);

  // Canonical headers: lower-case names in sorted order; repeated names join
  // their values with ',' in the order given ("get-header-key-duplicate").
  std::map<std::string, std::string> canonical;
  for (const auto& [name, value] : out.headers) {
    auto& slot = canonical[ascii_lower(name)];
    if (!slot.empty()) slot += ',';
    slot += canonical_value(value);
  }
  std::string canonical_headers, signed_headers;
  for (const auto& [name, value] : canonical) {
    canonical_headers += name + ":" + value + "\n";
    if (!signed_headers.empty()) signed_headers += ';';
    signed_headers += name;
  }

  out.canonical_request =
      fmt::format("{}\n{}\n{}\n{}\n{}\n{}", request.method, canonical_path(request.path),
                  canonical_query(request.query), canonical_headers, signed_headers,
                  hex_sha256(request.payload));

  const std::string scope = fmt::format("{}/{}/{}/aws4_request", date, region, service);
  out.string_to_sign = fmt::format("AWS4-HMAC-SHA256\n{}\n{}\n{}", timestamp, scope,
                                   hex_sha256(out.canonical_request));

  // The signing key is the documented chain of four keyed hashes.
  std::string key = hmac_sha256("AWS4" + credentials.secret_access_key, date);
  key = hmac_sha256(key, region);
  key = hmac_sha256(key, service);
  key = hmac_sha256(key, "aws4_request");
  const std::string mac = hmac_sha256(key, out.string_to_sign);
  out.signature = to_hex(reinterpret_cast<const unsigned char*>(mac.data()), mac.size());

  out.authorization =
      fmt::format("AWS4-HMAC-SHA256 Credential={}/{}, SignedHeaders={}, Signature={}",
                  credentials.access_key_id, scope, signed_headers, out.signature);
  out.headers.emplace_back("Authorization", out.authorization);
  return out;
}

}  // namespace harvest::sqs
