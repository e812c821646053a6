// The checked-in schema files (src/harvest/engine/schema.sql,
// src/harvest/connector/schema.sql) are what the migrations build: each is
// pg_dump --schema-only of a freshly migrated database, restricted to its
// module's tables, normalised. A migration that changes the schema without
// the file changing fails here; so does a hand edit of the file.
//
// To rewrite both files from the migrations (after adding one):
//   HARVEST_UPDATE_SCHEMA=1 scripts/test.sh -R SchemaTest
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "support/pg_fixture.hpp"

namespace harvest {
namespace {

// The dump without what varies between runs or says nothing about the
// schema: comments, SET lines and psql's \restrict keys; one blank line
// between statements.
std::string normalise(const std::string& text) {
  std::istringstream in(text);
  std::string line, out;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.starts_with("--") || line.starts_with("SET ") ||
        line.starts_with("SELECT pg_catalog.set_config") || line.starts_with("\\restrict") ||
        line.starts_with("\\unrestrict")) {
      continue;
    }
    if (line.empty() && (out.empty() || out.ends_with("\n\n"))) continue;
    out += line + "\n";
  }
  while (out.ends_with("\n\n")) out.pop_back();
  return out;
}

std::string read_file(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class SchemaTest : public testing::PgTest {
 protected:
  // pg_dump of the server's own major version (the test cluster's), or the
  // one on PATH.
  std::string pg_dump() {
    const std::string major = text("SELECT current_setting('server_version_num')::int / 10000");
    const std::string bundled = fmt::format("/usr/lib/postgresql/{}/bin/pg_dump", major);
    return std::filesystem::exists(bundled) ? bundled : "pg_dump";
  }

  // The normalised schema of the tables `patterns` selects (pg_dump -t/-T).
  std::string dump(const std::string& patterns) {
    const std::string cmd = fmt::format(
        "{} --schema-only --no-owner --no-privileges --no-comments --no-tablespaces {} '{}'",
        pg_dump(), patterns, db_url());
    FILE* p = popen(cmd.c_str(), "r");
    EXPECT_NE(p, nullptr);
    if (p == nullptr) return "";
    std::string out;
    std::array<char, 4096> buf{};
    size_t n = 0;
    while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) out.append(buf.data(), n);
    EXPECT_EQ(pclose(p), 0) << cmd;
    return normalise(out);
  }

  void check(const std::string& module, const std::string& patterns) {
    const std::filesystem::path file =
        std::filesystem::path(HARVEST_SOURCE_DIR) / "src/harvest" / module / "schema.sql";
    const std::string actual = dump(patterns);
    ASSERT_NE(actual.find("CREATE TABLE"), std::string::npos) << "the dump has no table";
    if (std::getenv("HARVEST_UPDATE_SCHEMA") != nullptr) {
      std::ofstream out(file);
      out << fmt::format(
                 "-- The {} module's tables as its migrations leave them (pg_dump --schema-only\n"
                 "-- of a freshly migrated database, normalised). Generated: do not edit; a\n"
                 "-- migration that changes the schema regenerates it with\n"
                 "--   HARVEST_UPDATE_SCHEMA=1 scripts/test.sh -R SchemaTest\n"
                 "-- and tests/plugin/schema_test.cpp fails while it is out of date.\n\n",
                 module)
          << actual;
      return;
    }
    ASSERT_TRUE(std::filesystem::exists(file)) << file << " is missing";
    EXPECT_EQ(normalise(read_file(file)), actual)
        << file << " differs from what the migrations build; if a migration changed the schema, "
        << "regenerate it: HARVEST_UPDATE_SCHEMA=1 scripts/test.sh -R SchemaTest";
  }
};

TEST_F(SchemaTest, engine_schema_file_matches_the_migrations) {
  check("engine", "-t 'harvest_*' -T 'harvest_connector_*' -T harvest_schema_migrations");
}

#if HARVEST_WITH_CONNECTORS
TEST_F(SchemaTest, connector_schema_file_matches_the_migrations) {
  check("connector", "-t 'harvest_connector_*'");
}

TEST_F(SchemaTest, the_comparison_sees_a_schema_change) {
  // The check itself: a column the file does not have makes the dumps differ.
  const std::string before = dump("-t 'harvest_connector_*'");
  ASSERT_TRUE(db().exec("ALTER TABLE harvest_connector_clusters ADD COLUMN extra int"));
  EXPECT_NE(dump("-t 'harvest_connector_*'"), before);
}
#endif

}  // namespace
}  // namespace harvest
