#include <fmt/format.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <chrono>
#include <new>
#include <random>

#include <harvest/common/ids.hpp>

namespace harvest {

namespace {
std::mt19937_64& rng() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine;
}
}  // namespace

namespace {

std::string format_uuid(const std::array<uint8_t, 16>& b) {
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
      "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
      b[15]);
}

std::array<uint8_t, 16> random_bytes() {
  std::array<uint8_t, 16> b{};
  uint64_t hi = rng()(), lo = rng()();
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(hi >> (i * 8));
    b[8 + i] = static_cast<uint8_t>(lo >> (i * 8));
  }
  return b;
}

}  // namespace

std::string new_uuid() {
  auto b = random_bytes();
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  return format_uuid(b);
}

std::string new_time_ordered_uuid() {
  auto b = random_bytes();
  const auto ms = static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                            std::chrono::system_clock::now().time_since_epoch())
                                            .count());
  for (int i = 0; i < 6; ++i) b[i] = static_cast<uint8_t>(ms >> (8 * (5 - i)));
  b[6] = (b[6] & 0x0f) | 0x70;  // version 7
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 9562 variant
  return format_uuid(b);
}

std::string sha256_hex(std::string_view data) {
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int len = 0;
  EVP_Digest(data.data(), data.size(), md.data(), &len, EVP_sha256(), nullptr);
  std::string out;
  out.reserve(len * 2);
  for (unsigned i = 0; i < len; ++i) out += fmt::format("{:02x}", md[i]);
  return out;
}

int64_t digest64(std::span<const std::string_view> parts) {
  EVP_MD_CTX* ctx = EVP_MD_CTX_new();
  if (ctx == nullptr) throw std::bad_alloc();
  EVP_DigestInit_ex(ctx, EVP_sha256(), nullptr);
  for (std::string_view part : parts) {
    const uint64_t n = part.size();
    std::array<unsigned char, 8> len{};
    for (size_t i = 0; i < len.size(); ++i) len[i] = static_cast<unsigned char>(n >> (56 - 8 * i));
    EVP_DigestUpdate(ctx, len.data(), len.size());
    EVP_DigestUpdate(ctx, part.data(), part.size());
  }
  std::array<unsigned char, EVP_MAX_MD_SIZE> md{};
  unsigned int md_len = 0;
  EVP_DigestFinal_ex(ctx, md.data(), &md_len);
  EVP_MD_CTX_free(ctx);
  uint64_t v = 0;
  for (size_t i = 0; i < 8; ++i) v = (v << 8) | md[i];
  return static_cast<int64_t>(v);
}

namespace {
// Length of the well-formed UTF-8 sequence starting at s[i], or 0.
size_t utf8_sequence(std::string_view s, size_t i) {
  auto c = static_cast<unsigned char>(s[i]);
  size_t len;
  uint32_t cp;
  if (c < 0x80) return 1;
  if ((c >> 5) == 0x6) {
    len = 2;
    cp = c & 0x1f;
  } else if ((c >> 4) == 0xe) {
    len = 3;
    cp = c & 0x0f;
  } else if ((c >> 3) == 0x1e) {
    len = 4;
    cp = c & 0x07;
  } else {
    return 0;
  }
  if (i + len > s.size()) return 0;
  for (size_t j = 1; j < len; ++j) {
    auto cc = static_cast<unsigned char>(s[i + j]);
    if ((cc >> 6) != 0x2) return 0;
    cp = (cp << 6) | (cc & 0x3f);
  }
  // Overlong encodings, surrogates and out-of-range code points are ill-formed.
  if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) || (len == 4 && cp < 0x10000) ||
      (cp >= 0xd800 && cp <= 0xdfff) || cp > 0x10ffff) {
    return 0;
  }
  return len;
}
}  // namespace

bool is_valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    if (n == 0) return false;
    i += n;
  }
  return true;
}

std::string to_valid_utf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    size_t n = utf8_sequence(s, i);
    if (n == 0) {
      out += "\xEF\xBF\xBD";  // U+FFFD
      ++i;
    } else {
      out.append(s.substr(i, n));
      i += n;
    }
  }
  return out;
}

std::string process_identity() {
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  return fmt::format("{}:{}:{:08x}", host.data(), getpid(), static_cast<uint32_t>(rng()()));
}

bool is_uuid(std::string_view s) {
  if (s.size() != 36) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    const char c = s[i];
    if (i == 8 || i == 13 || i == 18 || i == 23) {
      if (c != '-') return false;
    } else if (!std::isxdigit(static_cast<unsigned char>(c))) {
      return false;
    }
  }
  return true;
}

}  // namespace harvest
