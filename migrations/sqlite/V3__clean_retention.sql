-- Clean entries by age, for the optional retention of clean results (--clean-retention).
CREATE INDEX job_results_cleaned ON job_results (cleaned_at) WHERE state = 'clean';
CREATE INDEX application_results_cleaned ON application_results (cleaned_at) WHERE state = 'clean';
