// Entry points of the dspark subcommands. Each returns the process exit code
// (0 ok, 2 bad input: flags, files, prompts; 1 other failures;
// ab: 1 also when the verdict fails).
#pragma once

namespace dspark::tools {

int verb_get(int argc, char** argv);
int verb_generate(int argc, char** argv);
int verb_bench(int argc, char** argv);
int verb_inspect(int argc, char** argv);
int verb_tokenize(int argc, char** argv);
int verb_regen(int argc, char** argv);
int verb_train_drafter(int argc, char** argv);
int verb_quantize_drafter(int argc, char** argv);
int verb_sensitivity(int argc, char** argv);
int verb_drafter_diag(int argc, char** argv);
int verb_ab(int argc, char** argv);
int verb_serve(int argc, char** argv);
int verb_suffix_index(int argc, char** argv);
int verb_random_model(int argc, char** argv);

}  // namespace dspark::tools
