package api

import "context"

func (stub) AddDataset(context.Context, DatasetAdd) (DatasetInfo, error) { return DatasetInfo{}, nil }
func (stub) DatasetProgress(context.Context, string) (DatasetProgress, error) {
	return DatasetProgress{}, nil
}
func (stub) Datasets(context.Context) ([]DatasetInfo, error)            { return nil, nil }
func (stub) Dataset(context.Context, string) (DatasetInfo, error)       { return DatasetInfo{}, nil }
func (stub) RemoveDataset(context.Context, string) (DatasetInfo, error) { return DatasetInfo{}, nil }
func (stub) GetDataset(context.Context, string, DatasetGet) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}

func (stub) ImportDataset(context.Context, DatasetImport) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
func (stub) ExportDataset(context.Context, string, DatasetExport) (DatasetInfo, error) {
	return DatasetInfo{}, nil
}
