#include <iostream>

#include <harvest/cli/cli.hpp>

int main(int argc, char** argv) {
  return harvest::cli::run_cli(argc, argv, std::cout, std::cerr);
}
