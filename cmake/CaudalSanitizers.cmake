# -DCAUDAL_SANITIZE=address,undefined builds everything (tests included) with those sanitizers.
if(CAUDAL_SANITIZE)
  add_compile_options(-fsanitize=${CAUDAL_SANITIZE} -fno-omit-frame-pointer -fno-sanitize-recover=all)
  add_link_options(-fsanitize=${CAUDAL_SANITIZE})
endif()
