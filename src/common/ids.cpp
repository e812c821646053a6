#include "common/ids.hpp"

#include <fmt/format.h>
#include <openssl/evp.h>
#include <unistd.h>

#include <array>
#include <random>

namespace harvest {

namespace {
std::mt19937_64& rng() {
  thread_local std::mt19937_64 engine{std::random_device{}()};
  return engine;
}
}  // namespace

std::string new_uuid() {
  std::array<uint8_t, 16> b{};
  uint64_t hi = rng()(), lo = rng()();
  for (int i = 0; i < 8; ++i) {
    b[i] = static_cast<uint8_t>(hi >> (i * 8));
    b[8 + i] = static_cast<uint8_t>(lo >> (i * 8));
  }
  b[6] = (b[6] & 0x0f) | 0x40;  // version 4
  b[8] = (b[8] & 0x3f) | 0x80;  // RFC 4122 variant
  return fmt::format(
      "{:02x}{:02x}{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-{:02x}{:02x}-"
      "{:02x}{:02x}{:02x}{:02x}{:02x}{:02x}",
      b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
      b[15]);
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

std::string process_identity() {
  std::array<char, 256> host{};
  gethostname(host.data(), host.size() - 1);
  return fmt::format("{}:{}:{:08x}", host.data(), getpid(), static_cast<uint32_t>(rng()()));
}

}  // namespace harvest
