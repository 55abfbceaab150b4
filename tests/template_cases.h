/* template_cases.h: the six conversations of ../shared/chat-templates (its render.py's
 * CASES), as the JSON bodies a chat completion request carries, for the tests that
 * compare renderings with the expected files there. */
#ifndef TESSERA_TESTS_TEMPLATE_CASES_H
#define TESSERA_TESTS_TEMPLATE_CASES_H

/* strftime_now renders 2026-11-25 in the expected files. */
#define TEMPLATE_CASES_EPOCH 1795564800

#define TEMPLATE_CASES_TOOLS                                                                       \
    "[{\"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"description\": "        \
    "\"Get the weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": "      \
    "{\"city\": {\"type\": \"string\", \"description\": \"the city\"}}, \"required\": "            \
    "[\"city\"]}}}]"

static const struct template_case {
    const char *name;
    const char *body; /* messages, tools, add_generation_prompt; arguments as an object */
} template_cases[] = {
    {"user", "{\"messages\": [{\"role\": \"user\", \"content\": \"Tell me a story about a cat.\"}],"
             " \"add_generation_prompt\": true}"},
    {"system-multiturn",
     "{\"messages\": [{\"role\": \"system\", \"content\": \"You are a helpful storyteller.\"},"
     " {\"role\": \"user\", \"content\": \"Tell me a story about a cat.\"},"
     " {\"role\": \"assistant\", \"content\": \"Once upon a time, there was a cat named Tom.\"},"
     " {\"role\": \"user\", \"content\": \"What happened next?\"}], \"add_generation_prompt\": "
     "true}"},
    {"ends-with-assistant", "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi!\"},"
                            " {\"role\": \"assistant\", \"content\": \"Hello. How can I help?\"}],"
                            " \"add_generation_prompt\": false}"},
    {"whitespace", "{\"messages\": [{\"role\": \"user\", \"content\": \"  two spaces before, "
                   "newline after\\n\"}], \"add_generation_prompt\": true}"},
    {"tools",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"}],"
     " \"tools\": " TEMPLATE_CASES_TOOLS ", \"add_generation_prompt\": true}"},
    {"tool-round",
     "{\"messages\": [{\"role\": \"user\", \"content\": \"What is the weather in Paris?\"},"
     " {\"role\": \"assistant\", \"content\": \"\", \"tool_calls\": [{\"id\": \"abcDEF123\","
     " \"type\": \"function\", \"function\": {\"name\": \"get_weather\", \"arguments\":"
     " {\"city\": \"Paris\"}}}]},"
     " {\"role\": \"tool\", \"tool_call_id\": \"abcDEF123\", \"name\": \"get_weather\","
     " \"content\": \"{\\\"temp_c\\\": 21}\"}],"
     " \"tools\": " TEMPLATE_CASES_TOOLS ", \"add_generation_prompt\": true}"},
};
#define N_TEMPLATE_CASES (sizeof template_cases / sizeof template_cases[0])

#endif /* TESSERA_TESTS_TEMPLATE_CASES_H */
