namespace meshsim {}
